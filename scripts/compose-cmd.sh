# Sourced by the lab scripts: sets COMPOSE to the Compose command this machine has.
# Compose v2 (`docker compose`, the Docker CLI plugin) wins when present; else
# Compose v1 (`docker-compose`, Debian bookworm's 1.29, end of life). The lab files
# work with both: every container has a fixed container_name, and networks and
# volumes are named <project>_<name> by both. ELECTOR_COMPOSE overrides
# (e.g. ELECTOR_COMPOSE="docker-compose" to keep v1 where both are installed).
# Returns 1, COMPOSE empty, when neither is installed.
compose_detect() {
  COMPOSE=()
  if [ -n "${ELECTOR_COMPOSE:-}" ]; then
    read -r -a COMPOSE <<< "$ELECTOR_COMPOSE"
  elif docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE=(docker-compose)
  else
    return 1
  fi
}
