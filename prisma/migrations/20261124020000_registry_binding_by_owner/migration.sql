-- A credential's registry is what its owner states when the credential is written, never a guess:
-- NULL means "not bound yet", and such a credential is refused (when an endpoint, template or pod
-- names it, and at pull) until its owner gives the registry again together with the login.
ALTER TABLE "RegistryCredential" ALTER COLUMN "registry" DROP NOT NULL,
ALTER COLUMN "registry" DROP DEFAULT;

-- 20261124003000_registry_host_binding bound the credentials that existed before it to the registry
-- of the first image that used them (docker.io when none did). Any WRITE key could have chosen that
-- image (the attack the binding prevents), so those guesses are withdrawn: credentials created
-- before that migration finished are unbound until their owner binds them.
UPDATE "RegistryCredential" SET "registry" = NULL
-- ("createdAt" holds UTC, as Prisma writes timestamps.)
WHERE "createdAt" < (SELECT "finished_at" AT TIME ZONE 'UTC' FROM "_prisma_migrations" WHERE "migration_name" = '20261124003000_registry_host_binding' AND "rolled_back_at" IS NULL AND "finished_at" IS NOT NULL ORDER BY "finished_at" DESC LIMIT 1);
