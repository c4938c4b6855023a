import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Seals secrets at rest (registry passwords, SSH keys) with AES-256-GCM under the server key. */
export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  static fromKey(material: string): SecretBox {
    const key = /^[0-9a-f]{64}$/i.test(material) ? Buffer.from(material, 'hex') : Buffer.from(material, 'base64');
    if (key.length !== 32) throw new Error('GANTRY_SECRET_KEY must be 32 bytes, as 64 hex characters or base64');
    return new SecretBox(key);
  }

  /** The configured key, or one generated once into the data dir (mode 0600). */
  static load(configured: string | undefined, dataDir: string): SecretBox {
    if (configured) return SecretBox.fromKey(configured);
    const file = path.join(dataDir, 'secret.key');
    if (!existsSync(file)) {
      mkdirSync(dataDir, { recursive: true });
      writeFileSync(file, randomBytes(32).toString('hex') + '\n', { flag: 'wx', mode: 0o600 });
      chmodSync(file, 0o600);
    }
    return SecretBox.fromKey(readFileSync(file, 'utf8').trim());
  }

  /** A key of its own for one purpose (signed URLs, ...), so the sealing key is never used for anything else. */
  derive(purpose: string): Buffer {
    return createHmac('sha256', this.key).update(`gantry:${purpose}`).digest();
  }

  /** Layout: version byte, 12-byte IV, 16-byte tag, ciphertext. */
  seal(plain: string): Buffer {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([1]), iv, cipher.getAuthTag(), body]);
  }

  open(sealed: Uint8Array): string {
    const buf = Buffer.from(sealed);
    if (buf[0] !== 1) throw new Error('unknown secret format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, buf.subarray(1, 13));
    decipher.setAuthTag(buf.subarray(13, 29));
    return Buffer.concat([decipher.update(buf.subarray(29)), decipher.final()]).toString('utf8');
  }
}
