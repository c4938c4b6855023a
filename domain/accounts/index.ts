/**
 * Accounts and API keys: who is calling (a bearer key resolved once per request into a Principal),
 * the keys' scopes and endpoint limits, their creation and revocation. Owns the Account and ApiKey
 * rows, and the account's own settings (its SSH public keys).
 */
export * from './api-keys.ts';
export * from './auth.ts';
export * from './flash-login.ts';
export * from './user-settings.ts';
