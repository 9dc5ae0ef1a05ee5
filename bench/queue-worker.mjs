/**
 * A worker of the multi-process queue benchmark (forked by bench/lib/taskloop.mjs):
 * opens its own store on the shared file, reports `ready`, waits for `go`, then drains
 * tasks through the full lifecycle until a claim finds nothing, and reports `done`.
 * argv: <database path> <agent name>
 */
import { drainOne, openManager } from './lib/taskloop.mjs';

const [path, agent] = process.argv.slice(2);
const manager = openManager(path);

process.once('message', async (msg) => {
  if (msg?.type !== 'go') throw new Error(`worker ${agent}: unexpected message ${JSON.stringify(msg)}`);
  let count = 0;
  while (await drainOne(manager, agent)) count++;
  // Report first: closing the last connection checkpoints the WAL, which is not part of the drain.
  process.send({ type: 'done', count }, async () => {
    await manager.close();
    process.disconnect();
  });
});
process.send({ type: 'ready' });
