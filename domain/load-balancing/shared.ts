/** Worker addresses, shared by the health checks and the choice of workers. */

/** `http://<host>:<port>`, with brackets around IPv6 addresses. */
export const originOf = (host: string, port: number): string =>
  `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
