export { freeLoopbackPort as freePort } from '../../infra/local-port.ts';
