/** Injected time, so that tests move a clock instead of sleeping. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();

/** RFC 3339 UTC with milliseconds and Z. */
export const isoNow = (clock: Clock): string => clock().toISOString();
