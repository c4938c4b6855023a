/**
 * Public models: a queue-based endpoint the platform operator published under a model id, which
 * every account's RUN key calls with the job API (docs/public-models.md). Publishing is the
 * operator's (an ADMIN key of the administrator account); reading the catalogue is anyone's with a
 * valid key. The operations answer the domain's model of a published model (PublicModelFacts);
 * REST (api/routes/shapes/public-model.ts) and GraphQL (api/graphql/shapes/public-model.ts) each
 * map it to their own shape.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { Type, type Static } from 'typebox';
import { Prisma, type PublicModel } from '../../generated/prisma/client.ts';
import type { PublicModelOutputKind, PublicModelPriceUnit } from '../../generated/prisma/enums.ts';
import { requireAnyScope, requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, forbidden, notFound, validationFailed } from '../errors.ts';
import { recordCachesOf, type RecordCaches } from '../shared/record-cache.ts';
import { formatErrors, validate } from '../shared/validation.ts';
import type { Db } from '../shared/db.ts';
import { isUniqueViolation } from '../shared/db.ts';

/** Lowercase letter-and-digit groups joined by "-": at least one "-", so never an endpoint id (14 letters and digits). */
export const MODEL_ID_PATTERN = '^(?=.{3,64}$)[a-z0-9]+(?:-[a-z0-9]+)+$';
const MODEL_ID = new RegExp(MODEL_ID_PATTERN);
/** First path segments of /v2 routes that are not endpoint ids: a model may not take them. */
const RESERVED_IDS = new Set(['public-endpoints', 'network-volumes', 'container-registry-auth']);
/** The largest input schema (as JSON) a model may have. */
export const MAX_INPUT_SCHEMA_BYTES = 64 * 1024;

export const isModelId = (id: string): boolean => MODEL_ID.test(id) && !RESERVED_IDS.has(id);

export const ModelOutputKindSchema = Type.Union(
  [Type.Literal('image'), Type.Literal('video'), Type.Literal('audio'), Type.Literal('json')],
  {
    description: 'what the model returns: image_url, video_url, audio_url, or JSON only',
  },
);
export const ModelPriceSchema = Type.Object(
  {
    amount: Type.Number({ minimum: 0, maximum: 1000, description: 'USD per unit' }),
    unit: Type.Union([Type.Literal('call'), Type.Literal('megapixel'), Type.Literal('second')], {
      description:
        'call: per completed job; megapixel: per megapixel of the images returned; second: per second of the video or audio returned',
    }),
  },
  { additionalProperties: false },
);

const editable = {
  name: Type.String({ minLength: 1, maxLength: 100 }),
  description: Type.String({ maxLength: 2000 }),
  outputKind: ModelOutputKindSchema,
  inputSchema: Type.Object(
    {},
    { additionalProperties: true, description: 'JSON Schema of the job input (an object schema)' },
  ),
  price: ModelPriceSchema,
};

export const PublishPublicEndpointSchema = Type.Object(
  {
    id: Type.String({
      pattern: MODEL_ID_PATTERN,
      description:
        'the model id: lowercase letters and digits in groups joined by "-" (at least one "-"), 3-64 characters',
    }),
    endpointId: Type.String({ minLength: 1, maxLength: 64, description: 'a queue-based endpoint (of any account)' }),
    ...editable,
    description: Type.Optional(editable.description),
  },
  { additionalProperties: false },
);
export const UpdatePublicEndpointSchema = Type.Partial(Type.Object(editable, { additionalProperties: false }));

export type ModelOutputKind = Static<typeof ModelOutputKindSchema>;
export type ModelPriceUnit = Static<typeof ModelPriceSchema>['unit'];
const kindToDb = (k: ModelOutputKind): PublicModelOutputKind => k.toUpperCase() as PublicModelOutputKind;
const unitToDb = (u: ModelPriceUnit): PublicModelPriceUnit => u.toUpperCase() as PublicModelPriceUnit;
/** The row's output kind in the API's words (image, video, audio, json). */
export const kindFromDb = (k: PublicModelOutputKind): ModelOutputKind => k.toLowerCase() as ModelOutputKind;
/** The row's price unit in the API's words (call, megapixel, second). */
export const unitFromDb = (u: PublicModelPriceUnit): ModelPriceUnit => u.toLowerCase() as ModelPriceUnit;

/**
 * A published model as the domain knows it for one caller: its row, the base of the job API that
 * calls it, and whether the caller may see the endpoint behind it.
 */
export interface PublicModelFacts {
  row: PublicModel;
  /** The base of the job API for this model: `{runUrl}/run`, `/runsync`, `/status/{id}`. */
  runUrl: string;
  /** The caller is the operator, the only one shown the endpoint behind the model. */
  showsEndpoint: boolean;
}

function publicModelFacts(
  row: PublicModel,
  ctx: Pick<DomainContext, 'publicUrl'>,
  principal: Principal,
): PublicModelFacts {
  return { row, runUrl: `${ctx.publicUrl}/v2/${row.id}`, showsEndpoint: principal.isAdmin };
}

// ---------------------------------------------------------------- input schemas

/**
 * Input schemas are the operator's, compiled by an Ajv of their own (defaults filled in, every
 * error reported, unknown keywords such as UI hints allowed). Compiled once per model version.
 */
const schemaAjv = new Ajv({
  allErrors: true,
  useDefaults: true,
  coerceTypes: false,
  strict: false,
  validateFormats: false,
});
const compiled = new Map<string, ValidateFunction>();

function compileInputSchema(schema: unknown): ValidateFunction {
  const text = JSON.stringify(schema);
  if (Buffer.byteLength(text) > MAX_INPUT_SCHEMA_BYTES)
    throw validationFailed([`$.inputSchema: is larger than ${MAX_INPUT_SCHEMA_BYTES} bytes`]);
  const s = schema as { type?: unknown; $id?: unknown };
  if (s.type !== 'object')
    throw validationFailed(['$.inputSchema: must describe an object ("type": "object"): the job input is one']);
  if (s.$id !== undefined) throw validationFailed(['$.inputSchema: must not carry "$id"']);
  try {
    return schemaAjv.compile(schema as object);
  } catch (err) {
    throw validationFailed([
      `$.inputSchema: is not a usable JSON Schema: ${err instanceof Error ? err.message : String(err)}`,
    ]);
  }
}

function inputValidator(m: Pick<CachedModel, 'id' | 'updatedAt' | 'inputSchema'>): ValidateFunction {
  const key = `${m.id}@${m.updatedAt.getTime()}`;
  let fn = compiled.get(key);
  if (!fn) {
    for (const k of compiled.keys()) if (k.startsWith(`${m.id}@`)) compiled.delete(k);
    fn = compileInputSchema(m.inputSchema);
    compiled.set(key, fn);
  }
  return fn;
}

/** Checks (and fills defaults into) a job input against the model's schema; a 422 naming each field otherwise. */
export function validateModelInput(m: CachedModel, input: unknown): void {
  const fn = inputValidator(m);
  if (!fn(input)) throw validationFailed(formatErrors(fn.errors).map((e) => e.replace(/^\$/, '$.input')));
}

// ---------------------------------------------------------------- look-ups on the hot paths

/** A published model as the job API needs it. */
export interface CachedModel {
  id: string;
  endpointId: string;
  inputSchema: unknown;
  updatedAt: Date;
  outputKind: PublicModelOutputKind;
  priceAmount: number;
  priceUnit: PublicModelPriceUnit;
}

const CACHED_FIELDS = {
  id: true,
  endpointId: true,
  inputSchema: true,
  updatedAt: true,
  outputKind: true,
  priceAmount: true,
  priceUnit: true,
} as const;

/** The model by id through the record cache: a change or an unpublish reaches every process within the revocation bound. */
export function publishedModel(ctx: { db: Db; records?: RecordCaches }, id: string): Promise<CachedModel | undefined> {
  if (!isModelId(id)) return Promise.resolve(undefined);
  return recordCachesOf(ctx).models.get(
    id,
    async () => (await ctx.db.publicModel.findUnique({ where: { id }, select: CACHED_FIELDS })) ?? undefined,
  );
}

// ---------------------------------------------------------------- operations

function requireOperator(principal: Principal): void {
  requireScope(principal, 'ADMIN');
  if (!principal.isAdmin)
    throw forbidden("publishing public models is the platform operator's: an ADMIN key of the administrator account");
}

const requireReader = (principal: Principal): void => requireAnyScope(principal, ['READ', 'RUN']);

export async function listPublicModels(ctx: DomainContext, principal: Principal): Promise<PublicModelFacts[]> {
  requireReader(principal);
  const rows = await ctx.db.publicModel.findMany({ orderBy: { id: 'asc' }, take: 1000 });
  return rows.map((m) => publicModelFacts(m, ctx, principal));
}

export async function getPublicModel(ctx: DomainContext, principal: Principal, id: string): Promise<PublicModelFacts> {
  requireReader(principal);
  const m = isModelId(id) ? await ctx.db.publicModel.findUnique({ where: { id } }) : null;
  if (!m) throw notFound('public endpoint');
  return publicModelFacts(m, ctx, principal);
}

export async function publishPublicModel(
  ctx: DomainContext,
  principal: Principal,
  body: unknown,
): Promise<PublicModelFacts> {
  requireOperator(principal);
  const req = validate(PublishPublicEndpointSchema, body);
  if (RESERVED_IDS.has(req.id)) throw validationFailed([`$.id: "${req.id}" is a route of the API`]);
  compileInputSchema(req.inputSchema);
  const endpoint = await ctx.db.endpoint.findFirst({
    where: { id: req.endpointId, deletingAt: null },
    select: { type: true },
  });
  if (!endpoint) throw validationFailed([`$.endpointId: no endpoint ${req.endpointId}`]);
  if (endpoint.type !== 'QUEUE_BASED')
    throw validationFailed(['$.endpointId: only a queue-based endpoint can be published (the job API calls it)']);
  try {
    const m = await ctx.db.publicModel.create({
      data: {
        id: req.id,
        endpointId: req.endpointId,
        name: req.name,
        description: req.description ?? '',
        outputKind: kindToDb(req.outputKind),
        inputSchema: req.inputSchema as Prisma.InputJsonValue,
        priceAmount: req.price.amount,
        priceUnit: unitToDb(req.price.unit),
      },
    });
    return publicModelFacts(m, ctx, principal);
  } catch (err) {
    if (isUniqueViolation(err)) {
      const fields = String((err.meta as { target?: unknown } | undefined)?.target ?? '');
      throw new DomainError(
        'conflict',
        fields.includes('endpointId')
          ? `endpoint ${req.endpointId} is already published`
          : `a public endpoint "${req.id}" exists`,
      );
    }
    throw err;
  }
}

export async function updatePublicModel(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
): Promise<PublicModelFacts> {
  requireOperator(principal);
  const req = validate(UpdatePublicEndpointSchema, body);
  if (req.inputSchema !== undefined) compileInputSchema(req.inputSchema);
  const data: Prisma.PublicModelUpdateInput = {};
  if (req.name !== undefined) data.name = req.name;
  if (req.description !== undefined) data.description = req.description;
  if (req.outputKind !== undefined) data.outputKind = kindToDb(req.outputKind);
  if (req.inputSchema !== undefined) data.inputSchema = req.inputSchema as Prisma.InputJsonValue;
  if (req.price !== undefined) {
    data.priceAmount = req.price.amount;
    data.priceUnit = unitToDb(req.price.unit);
  }
  const m = isModelId(id) ? await ctx.db.publicModel.update({ where: { id }, data }).catch(notFoundOn2025) : null;
  if (!m) throw notFound('public endpoint');
  ctx.records?.models.delete(id);
  return publicModelFacts(m, ctx, principal);
}

export async function unpublishPublicModel(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireOperator(principal);
  const r = isModelId(id) ? await ctx.db.publicModel.deleteMany({ where: { id } }) : { count: 0 };
  if (r.count === 0) throw notFound('public endpoint');
  ctx.records?.models.delete(id);
}

function notFoundOn2025(err: unknown): null {
  if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2025') return null;
  throw err;
}
