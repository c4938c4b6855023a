/**
 * Quoting for the remote user's login shell, which must be POSIX (sh, bash, dash, zsh): every
 * command the platform runs on a host is built with shellJoin()/shellQuote().
 */

/** Quotes one argument for a POSIX shell: plain words stay as they are, the rest go in single quotes. */
export function shellQuote(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  // Inside single quotes nothing is special except the quote itself: close, escape it, reopen.
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(args: readonly string[]): string {
  return args.map(shellQuote).join(' ');
}
