/** Shared helpers of the queue benchmark: temp files, clocks, percentiles, tables. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A temp folder for the whole run; each scenario gets its own file inside it. */
export function createScratch() {
  const dir = mkdtempSync(join(tmpdir(), 'taskloop-bench-'));
  let n = 0;
  return {
    dir,
    /** A fresh database path (not created yet). */
    file(name) {
      n += 1;
      return join(dir, `${String(n).padStart(2, '0')}-${name}.db`);
    },
    /** Removes a database file with its -wal and -shm companions. */
    drop(path) {
      for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const nowNs = () => process.hrtime.bigint();
export const seconds = (startNs, endNs) => Number(endNs - startNs) / 1e9;

/** Nearest-rank percentile of a sorted array. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export function fmtInt(x) {
  return Math.round(x).toLocaleString('en-US');
}

export function fmtNum(x, digits = 2) {
  return Number.isFinite(x) ? x.toFixed(digits) : 'n/a';
}

/** Renders rows (arrays of strings) as a plain text table; numeric-looking cells align right. */
export function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const numeric = (s) => /^[-+]?[\d,.]+( ?[a-zµ/%x]*)?$/i.test(s);
  const line = (cells) =>
    cells.map((c, i) => (numeric(String(c)) && i > 0 ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** Progress lines go to stderr so stdout holds only the results. */
export function log(msg) {
  process.stderr.write(`[bench] ${msg}\n`);
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); NaN elsewhere. */
export function cpuSecondsOf(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in USER_HZ (100)
  } catch {
    return NaN;
  }
}
