import pg from 'pg';
import { inject } from 'vitest';
import { randomString } from '../../domain/shared/index.ts';

/** A fresh, migrated database cloned from the suite's template; returns its URL. */
export async function freshDatabase(): Promise<string> {
  const adminUrl = inject('postgresAdminUrl');
  const name = `t_${randomString(12)}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${inject('templateDatabase')}`);
  } finally {
    await admin.end();
  }
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}
