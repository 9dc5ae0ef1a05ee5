/** Turning CLI strings into typed values; each failure is a VALIDATION_FAILED naming the flag. */
import { readFileSync } from 'node:fs';
import { EngineError, LIMITS, assertTextDepth, isEngineError, parseDuration, parseTime } from '../engine/index.js';
import { UsageError } from './context.js';

export function integer(text: string, flag: string): number {
  if (!/^-?\d{1,16}$/.test(text.trim())) throw new EngineError('VALIDATION_FAILED', `${flag}: '${text}' is not an integer`);
  return Number(text);
}

export function taskIdArg(text: string): number {
  if (!/^\d{1,16}$/.test(text.trim())) throw new EngineError('VALIDATION_FAILED', `task id: '${text}' is not a task id (a positive integer)`);
  return Number(text);
}

export function duration(text: string, flag: string): number {
  return parseDuration(text, flag);
}

export function time(text: string, flag: string, now = Date.now()): number {
  return parseTime(text, now, flag);
}

export function list(text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

/**
 * Reads a JSON object from a file, or from standard input when `source` is `-`. Text nested
 * deeper than LIMITS.jsonDepth is refused before it is parsed (a VALIDATION_FAILED line).
 */
export function jsonObjectFrom(source: string, what: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(source === '-' ? 0 : source, 'utf8');
  } catch (err) {
    throw new EngineError('VALIDATION_FAILED', `${what}: cannot read ${source === '-' ? 'standard input' : source}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  assertTextDepth(text, what, LIMITS.jsonDepth);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new EngineError('VALIDATION_FAILED', `${what}: not valid JSON: ${(err as Error).message.split('\n')[0]}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new EngineError('VALIDATION_FAILED', `${what}: must be a JSON object, not ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`);
  }
  return value as Record<string, unknown>;
}

/** `--plugin` modules (default: task_enforcer) with their options from `--plugin-config FILE`. */
export function pluginSpecs(modules: string[] | undefined, configFile: string | undefined): Array<{ module: string; options: Record<string, unknown> }> {
  const config = configFile === undefined ? {} : jsonObjectFrom(configFile, '--plugin-config');
  return (modules ?? ['task_enforcer']).map((module) => ({ module, options: (config[module] as Record<string, unknown> | undefined) ?? {} }));
}

/**
 * Parses and checks a process's options (a daemon's, a server's) before anything is opened:
 * a wrong one is a usage error (exit 2), as a missing or unknown option is. Values the engine
 * judges (a card, a priority, a task id) stay VALIDATION_FAILED, exit 1.
 */
export function usage<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (isEngineError(err) && err.code === 'VALIDATION_FAILED') throw new UsageError(err.message);
    throw err;
  }
}
