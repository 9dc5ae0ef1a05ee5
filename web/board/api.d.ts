/**
 * What the board reads from the HTTP API (snake_case, ISO times), as src/engine/wire.ts and
 * src/monitor/http/*-routes.ts write it. Only the fields the board uses.
 */

interface WireTask {
  id: number;
  title: string;
  state: string;
  priority: number;
  creator: string;
  assignee: string | null;
  attempts: number;
  max_attempts: number;
  queue: string;
  created_at: string | null;
  updated_at: string | null;
  lease_expires_at: string | null;
  card: Record<string, unknown> | null;
  /** A finished task's result: the run's envelope (with its `phase`) when a run finished it. */
  result: unknown;
}

interface WireEvent {
  id: number;
  task_id: number | null;
  type: string;
  data: unknown;
}

interface TaskDetail extends WireTask {
  /** With `?events_after=`, only the events past that cursor. */
  events: WireEvent[];
  runs: WireRun[];
}

interface WireBudget {
  max_steps: number | null;
  max_failures: number | null;
  max_write_calls: number | null;
  max_pending: number | null;
  deadline: string | null;
  max_tokens: number | null;
  max_cost: number | null;
}

interface WireUsage {
  steps: number;
  write_calls: number;
  pending: number;
  tokens: number;
  cost: number;
  consecutive_failures: number;
}

interface Envelope {
  phase?: string;
  acceptance?: { failed?: unknown };
  [key: string]: unknown;
}

interface WireRun {
  id: number;
  task_id: number;
  phase: string;
  stop_reason: string | null;
  budget: WireBudget | null;
  usage: WireUsage | null;
  restarts: number;
  started_at: string | null;
  finished_at: string | null;
  envelope: Envelope | null;
}

interface WireStep {
  seq: number;
  kind: string;
  tool: string | null;
  status: string;
  args: unknown;
  result: unknown;
  error: unknown;
  duration_ms: number | null;
}

interface RunDetail extends WireRun {
  /** With `?steps_after=`, only the steps past that seq. */
  steps: WireStep[];
  screen: { seq: number; taken_at: string; url: string } | null;
}

interface WireApproval {
  id: number;
  task_id: number;
  tool: string;
  args: unknown;
  expires_at: string | null;
}

interface Session {
  actor: { id: string; role: string };
}

/** A task as a card on the board: no card body, no result; its goal and how it ended. */
interface BoardTask extends Omit<WireTask, 'card' | 'result'> {
  goal: string | null;
  /** The phase of the run that finished it (`completed`, `degraded`, …), when known. */
  outcome: string | null;
}

/** What `h` takes as children: nodes, text, nothing, or lists of them. */
type Child = Node | string | number | null | undefined | false | ChildList;
interface ChildList extends Array<Child> {}
