/** Messages between the desktop client (in a daemon thread) and its host child process. */

export interface WindowInfo {
  title: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

export type HostOp =
  | { op: 'snapshot'; windows: boolean }
  | { op: 'windows' }
  | { op: 'type'; text: string; delayMs: number }
  | { op: 'keys'; keys: string[] }
  | { op: 'click'; x: number; y: number; button: 'left' | 'right' | 'middle'; double: boolean };

export type HostRequest = { id: number } & HostOp;

export type HostReply =
  | { id: number; ok: true; result: unknown }
  /** `unavailable`: nut.js could not be loaded (maps to DESKTOP_UNAVAILABLE). */
  | { id: number; ok: false; error: string; unavailable?: boolean };

export interface Snapshot {
  width: number;
  height: number;
  windows?: WindowInfo[];
  /** PNG, base64, opaque. */
  image_png: string;
}
