import { defineConfig } from 'prisma/config';

// Used by the Prisma CLI (`prisma generate`, and `prisma migrate deploy` where its native engine can be had).
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://localhost:5432/gantry' },
});
