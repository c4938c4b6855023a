/**
 * The API's own TLS (GANTRY_TLS_CERT, GANTRY_TLS_KEY): PEM files read at start, checked, and read
 * again when either changes, so that a renewed certificate is served without a restart.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { createSecureContext } from 'node:tls';

export interface TlsFiles {
  /** PEM certificate chain, the server's own certificate first (GANTRY_TLS_CERT). */
  certFile: string;
  /** PEM private key of that certificate (GANTRY_TLS_KEY). */
  keyFile: string;
}

export interface TlsCredentials {
  cert: Buffer;
  key: Buffer;
  /** The certificate's subject alternative names, as `DNS:...`/`IP Address:...` (for the log). */
  names: string;
  validTo: Date;
}

function read(name: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(`${name}: cannot read ${file} (${code ?? (err as Error).message})`);
  }
}

/**
 * Reads and checks the pair: the certificate parses, the key parses and is the certificate's, and,
 * with a load-balancing domain, the certificate covers `<endpointId>.<lbDomain>` (a wildcard name),
 * which is what clients of load-balancing endpoints ask for. Errors name the variable at fault.
 */
export function readTlsCredentials(files: TlsFiles, lbDomain?: string): TlsCredentials {
  const cert = read('GANTRY_TLS_CERT', files.certFile);
  const key = read('GANTRY_TLS_KEY', files.keyFile);
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (err) {
    throw new Error(`GANTRY_TLS_CERT: ${files.certFile} is not a PEM certificate (${(err as Error).message})`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new Error(`GANTRY_TLS_KEY: ${files.keyFile} is not a PEM private key (${(err as Error).message})`);
  }
  if (!x509.checkPrivateKey(privateKey))
    throw new Error(`GANTRY_TLS_KEY: ${files.keyFile} is not the key of the certificate in GANTRY_TLS_CERT`);
  // The whole chain as OpenSSL takes it: what the server will load, so a start fails here and not later.
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new Error(`GANTRY_TLS_CERT: ${files.certFile} cannot be served (${(err as Error).message})`);
  }
  // Any label stands for an endpoint id: a certificate that covers one covers them all.
  if (lbDomain && !x509.checkHost(`endpointid.${lbDomain}`, { wildcards: true }))
    throw new Error(
      `GANTRY_TLS_CERT: ${files.certFile} does not cover *.${lbDomain} (GANTRY_LB_DOMAIN); it names ${x509.subjectAltName ?? x509.subject}`,
    );
  return { cert, key, names: x509.subjectAltName ?? x509.subject, validTo: new Date(x509.validTo) };
}

/**
 * Polls both files (stat, every `intervalMs`) and hands a changed pair to `apply` once it reads and
 * checks as a whole: a renewal that has written one file but not yet the other is skipped, and the
 * served certificate stays until the pair matches again. Polling, not inotify: renewals replace
 * files and symbolic links, which a watch on the old file would miss. Returns the stop function.
 */
export function watchTlsFiles(
  files: TlsFiles,
  lbDomain: string | undefined,
  apply: (credentials: TlsCredentials) => void,
  log: { info(msg: string): void; warn(msg: string): void },
  intervalMs = 2000,
): () => void {
  let pending: NodeJS.Timeout | undefined;
  const changed = (now: Stats, before: Stats): void => {
    if (now.mtimeMs === before.mtimeMs && now.ino === before.ino && now.size === before.size) return;
    // Both files of a renewal are written within moments of each other: read once they are.
    clearTimeout(pending);
    pending = setTimeout(() => {
      try {
        const next = readTlsCredentials(files, lbDomain);
        apply(next);
        log.info(`TLS certificate reloaded (${next.names}, valid to ${next.validTo.toISOString()})`);
      } catch (err) {
        log.warn(`TLS certificate not reloaded, the one served stays: ${(err as Error).message}`);
      }
    }, 200);
    pending.unref();
  };
  const options = { interval: intervalMs, persistent: false };
  watchFile(files.certFile, options, changed);
  watchFile(files.keyFile, options, changed);
  return () => {
    clearTimeout(pending);
    unwatchFile(files.certFile, changed);
    unwatchFile(files.keyFile, changed);
  };
}
