// node-redis 4.5.1 (Debian's node-redis; no Sentinel client in 4.x) on the virtual
// IP (docs/vip.md): createClient reconnects to the same address by itself, which
// the new primary holds once the elector has moved the VIP. SET and WAIT are
// issued in the same tick, so they travel on one connection in order.
// The loop and the lines printed: clients/python/common.py.
const fs = require('fs');
const { createClient } = require('redis');

const nowMs = () => Date.now();
const emit = (kind, rest) => process.stdout.write(`${kind} ${nowMs()} ${String(rest).replace(/\n/g, ' ')}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const [host, port] = process.env.VIP.split(':');
  const prefix = process.env.PREFIX || 'clients';
  const stop = process.env.STOP_FILE || '';
  const deadline = Date.now() + 1000 * Number(process.env.DEADLINE_S || 60);
  const max = Number(process.env.MAX_WRITES || 20000);
  const pace = Number(process.env.PACE_MS || 5);
  process.stderr.write(`# node-redis ${require('redis/package.json').version} on the virtual IP\n`);
  const client = createClient({
    url: `redis://${host}:${port}`,
    socket: { connectTimeout: 1000, reconnectStrategy: () => 50 },
    disableOfflineQueue: true,
  });
  client.on('error', () => {}); // reported where a command fails
  await client.connect().catch((e) => emit('err', `connect: ${e.message}`));
  for (let i = 0; i < max && Date.now() < deadline; ) {
    if (stop && i % 10 === 0 && fs.existsSync(stop)) break;
    const key = `${prefix}:${i}`;
    i += 1;
    try {
      const [, n] = await Promise.race([
        Promise.all([client.set(key, key), client.sendCommand(['WAIT', '1', '1000'])]),
        sleep(2000).then(() => { throw new Error('timeout after 2 s'); }),
      ]);
      emit(n >= 1 ? 'ack' : 'nack', key);
      await sleep(pace);
    } catch (e) {
      emit('err', `${e.name}: ${e.message}`.slice(0, 200));
      await sleep(50);
    }
  }
  await client.disconnect().catch(() => {});
  process.exit(0);
}

main();
