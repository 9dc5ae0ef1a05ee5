/**
 * Schedules (DESIGN §3): a cron expression and a card template. Every daemon runs the
 * scheduler; each fire time creates exactly one task however many daemons are up, because
 * the fire time is the task's idempotency key and the schedule's cursor moves in the same
 * transaction.
 */
import type { Actor, ActorRole, Card } from './types.js';

export type CatchUp = 'skip' | 'one' | 'all';

export interface Schedule {
  id: number;
  cron: string;
  title: string;
  card: Card;
  queue: string;
  /** What to do with fire times missed while no daemon ran. */
  catchUp: CatchUp;
  /** false: a fire is skipped while the previous task of this schedule is unfinished. */
  overlap: boolean;
  creator: string;
  creatorRole: ActorRole;
  /** The newest fire time handled (epoch ms); fires after it are due. */
  lastFireAt: number;
  lastTaskId: number | null;
  createdAt: number;
}

export interface AddScheduleInput {
  cron: string;
  title: string;
  card: Card;
  queue?: string;
  catchUp?: CatchUp;
  overlap?: boolean;
}

export interface FireResult {
  created: number[];
  skipped: number[];
}

export interface ScheduleStore {
  addSchedule(input: AddScheduleInput, creator: { id: string; role: ActorRole }): Promise<Schedule>;
  listSchedules(): Promise<Schedule[]>;
  removeSchedule(id: number, actor: Actor): Promise<void>;
  /**
   * Creates one task per fire time (ascending) not yet handled, honouring overlap, and moves
   * the schedule's cursor to `advanceTo`. Safe to call from many daemons at once.
   */
  fireSchedule(id: number, fireTimes: number[], advanceTo: number): Promise<FireResult>;
}
