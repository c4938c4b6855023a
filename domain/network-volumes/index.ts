/**
 * Network volumes: named storage in one data center that endpoints and pods mount. Owns the
 * NetworkVolume rows.
 */
export * from './network-volumes.ts';
