//! The configuration reference, generated from the config types: every key
//! with its type, default and meaning, as Markdown (docs/config-reference.md,
//! shipped in the package) and as the man page `elector.yaml(5)`.
//!
//! Why generated: a hand-kept list drifts from the code (the example config
//! once pointed at a man page that listed no key). The schema comes from
//! `schemars`, which reads the same serde attributes the loader obeys
//! (renames, defaults, optional fields) and the fields' doc comments, so the
//! reference says what the parser accepts. A unit test fails while
//! docs/config-reference.md differs from what this renders.

use serde_json::{Map, Value};

use super::Config;

/// One key of the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Dotted path, `peers[].id` for the keys of a list's items.
    pub key: String,
    /// `string`, `integer`, `boolean`, `section`, `list of sections`, or
    /// `one of: a, b`.
    pub kind: String,
    /// Required, or the default as YAML would spell it (`-` when none).
    pub default: String,
    /// The field's doc comment, on one line, with the meaning of each
    /// choice of an enumeration appended.
    pub meaning: String,
}

/// Every key of [`Config`], sections before their keys, keys sorted within
/// a section.
pub fn entries() -> Vec<Entry> {
    let schema = schemars::schema_for!(Config);
    let root = schema.as_value();
    let defs = root
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    walk(root, "", &defs, &mut out);
    out
}

/// The Markdown page (docs/config-reference.md).
pub fn markdown() -> String {
    let mut s = String::from(
        "# elector configuration reference\n\n\
         Every key of `elector.yaml` (`/etc/elector/elector.yaml`; `elector run --config`,\n\
         `$ELECTOR_CONFIG`). Generated from the config types (`elector/src/config`) by\n\
         `ELECTOR_BLESS=1 cargo test -p elector --lib config::reference`; a unit test fails\n\
         while this file differs, so do not edit it by hand. The same text is the man page\n\
         `elector.yaml(5)`. Unknown keys are refused with their line and column;\n\
         `elector check-config FILE...` checks a file (and a cluster's files together).\n\n\
         | Key | Type | Default | Meaning |\n|---|---|---|---|\n",
    );
    for e in entries() {
        s.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            e.key,
            cell(&e.kind),
            cell(&e.default),
            cell(&e.meaning)
        ));
    }
    s
}

/// The man page `elector.yaml(5)`, in roff.
pub fn man_page(version: &str) -> String {
    let mut s = format!(
        ".TH ELECTOR.YAML 5 \"\" \"elector {}\" \"File Formats\"\n\
         .SH NAME\nelector.yaml \\- configuration of the elector failover sidecar\n\
         .SH DESCRIPTION\nThe YAML file read by \\fBelector run\\fR and \\fBelector watchdog\\fR \
         (\\fI/etc/elector/elector.yaml\\fR, \\fB\\-\\-config\\fR, \\fB$ELECTOR_CONFIG\\fR). \
         Unknown keys are refused. Check a file with \\fBelector check-config\\fR.\n\
         .SH KEYS\n",
        roff(version)
    );
    for e in entries() {
        s.push_str(&format!(
            ".TP\n.B {}\n({}; {})\n{}\n",
            roff(&e.key),
            roff(&e.kind),
            roff(&e.default),
            roff(&e.meaning)
        ));
    }
    s.push_str(
        ".SH SEE ALSO\n\\fBelector\\fR(1), \\fBelector-run\\fR(1), \\fBelector-check-config\\fR(1), \
         /usr/share/doc/elector/config-reference.md\n",
    );
    s
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn roff(s: &str) -> String {
    let s = s.replace('\\', "\\\\").replace('-', "\\-");
    // A line starting with a dot or quote would be a roff request.
    match s.chars().next() {
        Some('.') | Some('\'') => format!("\\&{s}"),
        _ => s,
    }
}

/// The schema `s` points at: follows `$ref`, and unwraps an optional
/// (`anyOf: [X, null]`) to X. Returns it and whether null was allowed.
fn resolve<'a>(s: &'a Value, defs: &'a Map<String, Value>) -> (&'a Value, bool) {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        if let Some(d) = defs.get(name) {
            return (resolve(d, defs).0, false);
        }
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let non_null: Vec<&Value> = any
            .iter()
            .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if non_null.len() == 1 {
            return (resolve(non_null[0], defs).0, true);
        }
    }
    (s, false)
}

/// A doc comment on one line, with rustdoc's intra-doc links
/// (`` [`crate::a::B`] ``) shown as the item's name.
fn one_line(s: &str) -> String {
    let mut s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    while let Some(start) = s.find("[`crate::") {
        let Some(len) = s[start..].find("`]") else {
            break;
        };
        let path = &s[start + 2..start + len];
        let name = path.rsplit("::").next().unwrap_or(path).to_string();
        s.replace_range(start..start + len + 2, &format!("`{name}`"));
    }
    s
}

/// The type's name and, for an enumeration, what each choice means.
fn kind_of(s: &Value, defs: &Map<String, Value>) -> (String, String) {
    let (s, _) = resolve(s, defs);
    if let Some(choices) = s.get("oneOf").and_then(Value::as_array) {
        let mut names = Vec::new();
        let mut meanings = Vec::new();
        for c in choices {
            let name = c
                .get("const")
                .or_else(|| c.get("enum").and_then(|e| e.get(0)))
                .and_then(Value::as_str)
                .unwrap_or("?");
            names.push(name.to_string());
            if let Some(d) = c.get("description").and_then(Value::as_str) {
                meanings.push(format!("`{name}`: {}", one_line(d)));
            }
        }
        return (format!("one of: {}", names.join(", ")), meanings.join(" "));
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let names: Vec<&str> = e.iter().filter_map(Value::as_str).collect();
        return (format!("one of: {}", names.join(", ")), String::new());
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    };
    let ty = match ty.as_str() {
        "object" => "section".to_string(),
        "array" => match s.get("items").map(|i| resolve(i, defs).0) {
            Some(item) if item.get("properties").is_some() => "list of sections".into(),
            Some(item) => format!("list of {}", kind_of(item, defs).0),
            None => "list".into(),
        },
        _ => ty,
    };
    (ty, String::new())
}

fn yaml_value(v: &Value) -> String {
    match v {
        Value::Null => "unset".into(),
        Value::String(s) if s.is_empty() => "\"\"".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Object(_) => "(see its keys)".into(),
        other => other.to_string(),
    }
}

fn walk(s: &Value, prefix: &str, defs: &Map<String, Value>, out: &mut Vec<Entry>) {
    let (s, _) = resolve(s, defs);
    let Some(props) = s.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut names: Vec<&String> = props.keys().collect();
    names.sort();
    for name in names {
        let p = &props[name];
        let key = format!("{prefix}{name}");
        let (kind, choices) = kind_of(p, defs);
        let (target, wrapped) = resolve(p, defs);
        let nullable = wrapped
            || p.get("type")
                .and_then(Value::as_array)
                .is_some_and(|ts| ts.iter().any(|t| t == "null"));
        // A default serde skips when writing (`skip_serializing_if`) is
        // not in the schema; these are the loader's for such keys.
        let default = match p.get("default") {
            _ if required.contains(&name.as_str()) => "required".to_string(),
            Some(v) => yaml_value(v),
            None if nullable => "unset".into(),
            None if kind == "boolean" => "false".into(),
            None if kind.starts_with("list") => "[]".into(),
            None if kind == "section" => "(see its keys)".into(),
            None => "-".into(),
        };
        let doc = p
            .get("description")
            .or_else(|| target.get("description"))
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_default();
        let meaning = [doc, choices]
            .into_iter()
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        out.push(Entry {
            key: key.clone(),
            kind: kind.clone(),
            default,
            meaning,
        });
        if kind == "section" {
            walk(target, &format!("{key}."), defs, out);
        } else if kind == "list of sections" {
            if let Some(items) = target.get("items") {
                walk(items, &format!("{key}[]."), defs, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_file(rel: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(rel)
    }

    #[test]
    fn docs_config_reference_is_what_the_config_types_render() {
        let path = repo_file("docs/config-reference.md");
        let rendered = markdown();
        if std::env::var_os("ELECTOR_BLESS").is_some() {
            std::fs::write(&path, &rendered).expect("writing docs/config-reference.md");
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "docs/config-reference.md is stale: run ELECTOR_BLESS=1 cargo test -p elector --lib config::reference"
        );
    }

    #[test]
    fn every_key_the_example_config_uses_is_in_the_reference_with_a_meaning() {
        let entries = entries();
        let keys: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
        for key in [
            "node_id",
            "listen.election",
            "listen.api",
            "data_node.kind",
            "data_node.replication_gate",
            "peers[].id",
            "peers[].witness",
            "timings.down_after_ms",
            "timings.fence_margin_ms",
            "auth.mode",
            "hooks.on_promote",
            "vip.address",
            "preempt.delay_ms",
            "log_format",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        let undocumented: Vec<&str> = entries
            .iter()
            .filter(|e| e.meaning.is_empty())
            .map(|e| e.key.as_str())
            .collect();
        assert!(
            undocumented.is_empty(),
            "keys without a meaning: {undocumented:?}"
        );
    }

    #[test]
    fn defaults_and_required_keys_are_the_loaders() {
        let e = entries();
        let find = |k: &str| e.iter().find(|x| x.key == k).expect(k).clone();
        assert_eq!(find("node_id").default, "required");
        assert_eq!(find("timings.hb_interval_ms").default, "200");
        assert_eq!(find("log_format").default, "text");
        assert_eq!(find("log_format").kind, "one of: text, json");
        assert_eq!(find("data_node.kind").kind, "one of: kevy, redis");
        assert_eq!(find("auth.mode").default, "none");
    }

    #[test]
    fn the_man_page_is_roff_with_one_entry_per_key() {
        let page = man_page("1.2.3");
        assert!(page.starts_with(".TH ELECTOR.YAML 5"));
        assert_eq!(page.matches("\n.TP\n").count(), entries().len());
        assert!(page.contains(".B timings.down_after_ms\n"));
    }
}
