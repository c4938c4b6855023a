import { Type, type Static } from 'typebox';
import {
  JobStatusSchema,
  LIST_ERROR_CAP,
  PAYLOAD_CAP_BYTES,
  type EndpointJobDetailModel,
  type EndpointJobRow,
  type EndpointJobsPage,
} from '../../../domain/jobs/index.ts';

/**
 * An endpoint's recent jobs in REST v2 (`/v2/serverless/{id}/jobs` and `/jobs/{jobId}`, the
 * console's Requests tab): the list's rows, and one job with its input and output under the caps.
 */
const Time = Type.String({ format: 'date-time' });
const NullableTime = Type.Union([Time, Type.Null()]);

const JOB_PROPERTIES = {
  id: Type.String(),
  status: JobStatusSchema,
  createdAt: Type.String({
    format: 'date-time',
    description: 'when it was submitted (a retry submits it again: the retry time)',
  }),
  startedAt: Type.Union([Time, Type.Null()], { description: 'when a worker took it; null while queued' }),
  completedAt: NullableTime,
  expiresAt: Type.String({ format: 'date-time', description: 'after this the job is gone (404 on /status)' }),
  delayTime: Type.Union([Type.Integer(), Type.Null()], {
    description: 'ms from submission to start, as /status answers it; null until started',
  }),
  executionTime: Type.Union([Type.Integer(), Type.Null()], {
    description: 'ms from start to finish; null until finished',
  }),
  workerId: Type.Union([Type.String(), Type.Null()]),
  retries: Type.Integer({ minimum: 0 }),
  error: Type.Union([Type.String(), Type.Null()], {
    description: `the worker's error, cut at ${LIST_ERROR_CAP} characters in the list and at ${PAYLOAD_CAP_BYTES} in one job's read`,
  }),
  errorTruncated: Type.Boolean(),
};

export const EndpointJobSchema = Type.Object(JOB_PROPERTIES);
export type EndpointJob = Static<typeof EndpointJobSchema>;

export const EndpointJobsSchema = Type.Object({
  jobs: Type.Array(EndpointJobSchema),
  nextBefore: Type.Union([Type.String(), Type.Null()], {
    description: 'pass as `before` for the next (older) page; null when this page is the last',
  }),
});
export type EndpointJobs = Static<typeof EndpointJobsSchema>;

const payloadProperties = (what: 'input' | 'output') => ({
  value: Type.Optional(
    Type.Unknown({
      description: `the job's ${what}, when its JSON text is at most ${PAYLOAD_CAP_BYTES} bytes${what === 'output' ? ' (absent: none yet)' : ''}`,
    }),
  ),
  bytes: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
    description: `size of its JSON text as PostgreSQL writes it${what === 'output' ? '; null without an output' : ''}`,
  }),
  truncated: Type.Boolean({
    description: `true when that is larger than ${PAYLOAD_CAP_BYTES} bytes: then \`${what}\` is absent and \`${what}Preview\` holds the start of the text`,
  }),
  preview: Type.Optional(
    Type.String({
      description: `only when truncated: the first ${PAYLOAD_CAP_BYTES} bytes (or less) of its JSON text`,
    }),
  ),
});
const inputProperties = payloadProperties('input');
const outputProperties = payloadProperties('output');

export const EndpointJobDetailSchema = Type.Object({
  ...JOB_PROPERTIES,
  input: inputProperties.value,
  inputBytes: inputProperties.bytes,
  inputTruncated: inputProperties.truncated,
  inputPreview: inputProperties.preview,
  output: outputProperties.value,
  outputBytes: outputProperties.bytes,
  outputTruncated: outputProperties.truncated,
  outputPreview: outputProperties.preview,
});
export type EndpointJobDetail = Static<typeof EndpointJobDetailSchema>;

/** The REST shape of one job of the list, from the row the domain read. */
export function endpointJobView(j: EndpointJobRow): EndpointJob {
  return {
    id: j.id,
    status: j.status,
    createdAt: j.createdAt,
    startedAt: j.startedAt,
    completedAt: j.completedAt,
    expiresAt: j.expiresAt,
    delayTime: j.delayTime,
    executionTime: j.executionTime,
    workerId: j.workerId,
    retries: j.retries,
    error: j.error,
    errorTruncated: j.errorTruncated,
  };
}

/** The REST shape of a page of the list. */
export function endpointJobsView(page: EndpointJobsPage): EndpointJobs {
  return { jobs: page.jobs.map(endpointJobView), nextBefore: page.nextBefore };
}

/** The REST shape of one job with its input and output, as far as the caps allow. */
export function endpointJobDetailView({ job, input, output }: EndpointJobDetailModel): EndpointJobDetail {
  const detail: EndpointJobDetail = {
    ...endpointJobView(job),
    inputBytes: input.bytes,
    inputTruncated: input.truncated,
    outputBytes: output.bytes,
    outputTruncated: output.truncated,
  };
  // Absent, not undefined, where the domain left a value or a preview out (a JSON null is a value).
  if ('value' in input) detail.input = input.value;
  if (input.preview !== undefined) detail.inputPreview = input.preview;
  if ('value' in output) detail.output = output.value;
  if (output.preview !== undefined) detail.outputPreview = output.preview;
  return detail;
}
