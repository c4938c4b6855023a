/**
 * Throwaway certificates for tests, made with the `openssl` command in a temporary directory: a CA
 * of the test's own and server certificates it signs. Nothing here is kept or committed.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TestCa {
  dir: string;
  certFile: string;
  keyFile: string;
}

export interface TestCertificate {
  certFile: string;
  keyFile: string;
}

const openssl = (args: string[], cwd: string): void => {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
};

/** A new CA (EC P-256, one day) in a new temporary directory. */
export function createTestCa(name = 'Gantry test CA'): TestCa {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-tls-'));
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
    ],
    dir,
  );
  return { dir, certFile: path.join(dir, 'ca.pem'), keyFile: path.join(dir, 'ca.key') };
}

/** A server certificate for `names` (DNS names, wildcards allowed), signed by `ca`, in ca.dir as `<file>.pem`/`<file>.key`. */
export function issueTestCertificate(ca: TestCa, file: string, names: string[]): TestCertificate {
  const ext = path.join(ca.dir, `${file}.ext`);
  writeFileSync(
    ext,
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      'authorityKeyIdentifier=keyid',
      `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
      '',
    ].join('\n'),
  );
  openssl(
    [
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-subj',
      `/CN=${names[0]}`,
      '-keyout',
      `${file}.key`,
      '-out',
      `${file}.csr`,
    ],
    ca.dir,
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${file}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      ext,
      '-out',
      `${file}.pem`,
    ],
    ca.dir,
  );
  return { certFile: path.join(ca.dir, `${file}.pem`), keyFile: path.join(ca.dir, `${file}.key`) };
}
