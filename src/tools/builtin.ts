/** Every tool taskloop ships, in the order `taskloop tools` lists them. */
import { basicTools } from './basic.js';
import { desktopTools } from './desktop/tools.js';
import type { Tool } from './registry.js';
import { taskTools } from './task-tools.js';
import { ticketTools } from './tickets.js';

export function builtInTools(): Tool[] {
  return [...taskTools, ...ticketTools, ...basicTools, ...desktopTools];
}
