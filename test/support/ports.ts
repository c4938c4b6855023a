export { freeLoopbackPort as freePort } from './local-port.ts';
