import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '../../generated/prisma/client.ts';

export type Db = PrismaClient;
export type { Prisma } from '../../generated/prisma/client.ts';

/** A Prisma client over node-postgres (the driver adapter; no native query engine). */
export function createDb(databaseUrl: string, poolSize = 10): Db {
  const adapter = new PrismaPg({ connectionString: databaseUrl, max: poolSize });
  return new PrismaClient({ adapter });
}
