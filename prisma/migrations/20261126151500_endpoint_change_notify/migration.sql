-- Every API process remembers the endpoint rows its management reads return (domain/endpoints/
-- endpoints.ts findOwnedForRead) and the live endpoints the job API and the proxy check, and
-- forgets one the moment this notification reaches it: any change of the row, or its removal.
-- Sent at commit, to every listening process.
CREATE FUNCTION gantry_notify_endpoint_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gantry_records', 'endpoint:' || OLD.id);
  RETURN NULL;
END;
$$;

CREATE TRIGGER "Endpoint_notify_change" AFTER UPDATE ON "Endpoint" FOR EACH ROW
  WHEN (OLD.* IS DISTINCT FROM NEW.*)
  EXECUTE FUNCTION gantry_notify_endpoint_change();
CREATE TRIGGER "Endpoint_notify_delete" AFTER DELETE ON "Endpoint" FOR EACH ROW EXECUTE FUNCTION gantry_notify_endpoint_change();
