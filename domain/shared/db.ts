import { PrismaPg } from '@prisma/adapter-pg';
import { Prisma as PrismaNamespace, PrismaClient } from '../../generated/prisma/client.ts';
import type { DomainContext } from '../context.ts';

export type Db = PrismaClient;
export type { Prisma } from '../../generated/prisma/client.ts';

/** A Prisma client over node-postgres (the driver adapter; no native query engine). */
export function createDb(databaseUrl: string, poolSize = 10): Db {
  const adapter = new PrismaPg({ connectionString: databaseUrl, max: poolSize });
  return new PrismaClient({ adapter });
}

/** A unique constraint refused the write (Prisma's P2002): the caller's conflict, not a failure. */
export const isUniqueViolation = (err: unknown): err is PrismaNamespace.PrismaClientKnownRequestError =>
  err instanceof PrismaNamespace.PrismaClientKnownRequestError && err.code === 'P2002';

/**
 * Raw reads on the job runtime's node-postgres pool where this process has one (the API's: no
 * Prisma round trip), else through Prisma.
 */
export function rowReader(
  ctx: Pick<DomainContext, 'db' | 'jobs'>,
): <T>(text: string, values: unknown[]) => Promise<T[]> {
  const store = ctx.jobs?.store;
  return store
    ? <T>(text: string, values: unknown[]) => store.rows<T>(text, values)
    : <T>(text: string, values: unknown[]) => ctx.db.$queryRawUnsafe<T[]>(text, ...values);
}
