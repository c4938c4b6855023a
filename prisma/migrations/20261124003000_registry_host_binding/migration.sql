-- A registry credential is bound to one registry host: an image elsewhere cannot be pulled with it.
ALTER TABLE "RegistryCredential" ADD COLUMN "registry" TEXT NOT NULL DEFAULT 'docker.io';

-- Existing credentials take the registry of an image that already uses them (endpoints, then
-- templates, then pods; the same rule as registryOf in domain/container-fields.ts); unused ones
-- keep docker.io, the registry of bare image names.
UPDATE "RegistryCredential" c SET "registry" = coalesce(
  (SELECT CASE WHEN position('/' IN e."image") = 0 THEN 'docker.io' WHEN split_part(e."image", '/', 1) ~ '[.:]' OR split_part(e."image", '/', 1) = 'localhost' THEN split_part(e."image", '/', 1) ELSE 'docker.io' END FROM "Endpoint" e WHERE e."registryId" = c."id" ORDER BY e."createdAt" LIMIT 1),
  (SELECT CASE WHEN position('/' IN t."imageName") = 0 THEN 'docker.io' WHEN split_part(t."imageName", '/', 1) ~ '[.:]' OR split_part(t."imageName", '/', 1) = 'localhost' THEN split_part(t."imageName", '/', 1) ELSE 'docker.io' END FROM "Template" t WHERE t."registryId" = c."id" ORDER BY t."createdAt" LIMIT 1),
  (SELECT CASE WHEN position('/' IN p."imageName") = 0 THEN 'docker.io' WHEN split_part(p."imageName", '/', 1) ~ '[.:]' OR split_part(p."imageName", '/', 1) = 'localhost' THEN split_part(p."imageName", '/', 1) ELSE 'docker.io' END FROM "Pod" p WHERE p."registryId" = c."id" ORDER BY p."createdAt" LIMIT 1),
  'docker.io');
