/**
 * `taskloop info`: which store the commands talk to, its version and schema version, and
 * what it can do (StoreInfo). It only reads: a database that does not exist is
 * STORE_NOT_FOUND, and nothing is created.
 */
import type { Command } from 'commander';
import { type StoreInfo, toWireStoreInfo } from '../engine/index.js';
import type { Run } from './task-commands.js';

function infoText(i: StoreInfo): string {
  const yes = (b: boolean) => (b ? 'yes' : 'no');
  return [
    `store            ${i.kind} ${i.version}`,
    `location         ${i.location}${i.readonly ? ' (opened read-only)' : ''}`,
    `schema version   ${i.schemaVersion} (this taskloop knows up to ${i.knownSchemaVersion})`,
    `multiple hosts   ${yes(i.capabilities.multipleHosts)}`,
    `pid liveness     ${yes(i.capabilities.pidLiveness)}`,
    `push wake-ups    ${yes(i.capabilities.pushWakeups)}`,
    `skip locked      ${yes(i.capabilities.skipLocked)}`,
  ].join('\n');
}

export function registerInfoCommand(program: Command, run: Run): void {
  program
    .command('info')
    .description('which store this is (kind, version, schema version) and what it can do')
    .action(async (_o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const info = await ctx.manager().store.info();
        ctx.out(toWireStoreInfo(info), () => infoText(info));
      }),
    );
}
