/**
 * How many tasks of a SQLite file have completed, for a bench that waits on daemons in other
 * processes: each call reads only the events appended since the last call (SQLite's single
 * writer hands out event ids in commit order, so a row that commits later never has a lower
 * id). Throws once any task has failed or been cancelled, so a bench stops at once instead of
 * waiting out its timeout.
 *
 * Why not `SELECT state, count(*) FROM tasks GROUP BY state`: on a 40,000-task file that read
 * costs ~2.8 ms, and `bench:scale` polling it every 5–20 ms spent ~2.2 s of CPU in a 7 s
 * daemon drain, a third of a core taken from the daemons it measured on a two-core machine
 * (session 30, BENCHMARKS.md). This read costs what the events since the last poll cost.
 */
export function completionCounter(db) {
  const tail = db.prepare(
    `SELECT max(id) AS last,
            coalesce(sum(type = 'task.transitioned' AND data LIKE '%"to":"completed"%'), 0) AS done,
            coalesce(sum(type IN ('task.transitioned', 'task.cancelled') AND (data LIKE '%"to":"failed"%' OR data LIKE '%"to":"cancelled"%')), 0) AS bad
       FROM task_events WHERE id > ?`,
  );
  let cursor = 0;
  let done = 0;
  let bad = 0;
  return () => {
    const r = tail.get(cursor);
    if (r.last !== null) {
      cursor = r.last;
      done += r.done;
      bad += r.bad;
    }
    if (bad > 0) throw new Error(`${bad} task(s) failed or were cancelled (${done} completed)`);
    return done;
  };
}
