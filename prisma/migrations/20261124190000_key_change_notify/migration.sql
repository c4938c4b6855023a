-- Every API process remembers the keys it has checked (domain/record-cache.ts) and forgets one the
-- moment this notification reaches it: a key revoked, its scopes, endpoints or expiry changed, or
-- its account's administrator flag changed. Sent at commit, to every listening process.
CREATE FUNCTION gantry_notify_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'ApiKey' THEN
    PERFORM pg_notify('gantry_records', 'key:' || OLD.hash);
  ELSE
    PERFORM pg_notify('gantry_records', 'account:' || OLD.id);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER "ApiKey_notify_change" AFTER UPDATE ON "ApiKey" FOR EACH ROW
  WHEN (OLD."revokedAt" IS DISTINCT FROM NEW."revokedAt" OR OLD.scopes IS DISTINCT FROM NEW.scopes
        OR OLD."endpointIds" IS DISTINCT FROM NEW."endpointIds" OR OLD."expiresAt" IS DISTINCT FROM NEW."expiresAt"
        OR OLD.hash IS DISTINCT FROM NEW.hash OR OLD."accountId" IS DISTINCT FROM NEW."accountId")
  EXECUTE FUNCTION gantry_notify_key_change();
CREATE TRIGGER "ApiKey_notify_delete" AFTER DELETE ON "ApiKey" FOR EACH ROW EXECUTE FUNCTION gantry_notify_key_change();

CREATE TRIGGER "Account_notify_change" AFTER UPDATE ON "Account" FOR EACH ROW
  WHEN (OLD."isAdmin" IS DISTINCT FROM NEW."isAdmin")
  EXECUTE FUNCTION gantry_notify_key_change();
CREATE TRIGGER "Account_notify_delete" AFTER DELETE ON "Account" FOR EACH ROW EXECUTE FUNCTION gantry_notify_key_change();
