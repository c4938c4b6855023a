import { PrismaPg } from '@prisma/adapter-pg';
import { Prisma as PrismaNamespace, PrismaClient } from '../../generated/prisma/client.ts';

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
