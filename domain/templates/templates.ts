import type { Static } from 'typebox';
import type { Template } from '../../generated/prisma/client.ts';
import { type Principal, requireAccountWide, requireScope } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { registryBindingProblems } from '../registries/registries.ts';
import { isUniqueViolation } from '../shared/db.ts';
import { validate } from '../shared/validation.ts';
import { CreateTemplateSchema, SaveTemplateInputSchema, UpdateTemplateSchema } from './schemas.ts';

/**
 * Templates: named container configurations (image, args, disk, ports, env, registry, volume) that
 * endpoints and pods are created from. One set of rules behind two input shapes: the REST shape
 * (`image`, `args`, `disk`, `ports` array, `env` object, `registry`, `mounts`) and the GraphQL
 * shape (`imageName`, `dockerArgs`, `containerDiskInGb`, `ports` string, `env` [{key, value}],
 * `containerRegistryAuthId`, `volumeInGb`). A template is a snapshot: changing it does not change
 * endpoints or pods already made from it.
 */

/** The `port/protocol` entries of a comma-separated ports field. */
export const portList = (ports: string): string[] =>
  ports
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);

/** A template's stored fields (the model's names). */
interface TemplateFields {
  name: string;
  imageName: string;
  dockerArgs: string;
  containerDiskInGb: number;
  volumeInGb: number;
  volumeMountPath: string;
  env: Record<string, string>;
  ports: string;
  isServerless: boolean;
  readme: string;
  registryId: string | null;
  /** Defaults of a pod deployed from the template (GraphQL only). */
  gpuTypeId: string | null;
  gpuCount: number | null;
}

/** Where each rule's failure is reported, in the caller's own field names. */
interface FieldPaths {
  ports: string;
  volume: string;
  registry: string;
}
const REST_PATHS: FieldPaths = { ports: '$.ports', volume: '$.mounts.persistent', registry: '$.registry' };
const GRAPHQL_PATHS: FieldPaths = { ports: '$.ports', volume: '$.volumeInGb', registry: '$.containerRegistryAuthId' };

const DEFAULTS: Omit<TemplateFields, 'name' | 'imageName'> = {
  dockerArgs: '',
  containerDiskInGb: 10,
  volumeInGb: 0,
  volumeMountPath: '/workspace',
  env: {},
  ports: '',
  isServerless: false,
  readme: '',
  registryId: null,
  gpuTypeId: null,
  gpuCount: null,
};

function portProblems(ports: string, at: string): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const entry of portList(ports)) {
    const m = /^([0-9]{1,5})\/(http|tcp|udp)$/.exec(entry);
    if (!m || Number(m[1]) < 1 || Number(m[1]) > 65535)
      problems.push(`${at}: '${entry}' is not port/protocol with a port 1-65535 and protocol http, tcp or udp`);
    else if (seen.has(entry)) problems.push(`${at}: '${entry}' is listed twice`);
    seen.add(entry);
  }
  return problems;
}

async function save(
  ctx: DomainContext,
  principal: Principal,
  id: string | undefined,
  patch: Partial<TemplateFields>,
  paths: FieldPaths,
): Promise<Template> {
  try {
    return await ctx.db.$transaction(async (tx) => {
      let base: TemplateFields | undefined;
      if (id !== undefined) {
        const existing = await tx.template.findFirst({ where: { id, accountId: principal.accountId } });
        if (!existing) throw notFound('template');
        base = { ...existing, env: existing.env as Record<string, string> };
      }
      const merged = { ...DEFAULTS, ...base, ...patch } as TemplateFields;
      const problems = portProblems(merged.ports, paths.ports);
      if (merged.isServerless && merged.volumeInGb > 0) {
        problems.push(
          `${paths.volume}: serverless templates cannot have a persistent volume (workers are replaced freely); use a network volume`,
        );
      }
      if (merged.gpuCount === 0 && merged.gpuTypeId !== null)
        problems.push(
          '$.gpuTypeId: a template with gpuCount 0 makes CPU pods; leave gpuTypeId out or ask for at least one GPU',
        );
      if (merged.registryId !== null && (patch.registryId !== undefined || patch.imageName !== undefined)) {
        problems.push(
          ...(await registryBindingProblems(
            tx,
            principal.accountId,
            merged.registryId,
            merged.imageName,
            paths.registry,
          )),
        );
      }
      if (problems.length > 0) throw validationFailed(problems);
      const data = {
        name: merged.name,
        imageName: merged.imageName,
        dockerArgs: merged.dockerArgs,
        containerDiskInGb: merged.containerDiskInGb,
        volumeInGb: merged.volumeInGb,
        volumeMountPath: merged.volumeMountPath,
        env: merged.env,
        ports: portList(merged.ports).join(','),
        isServerless: merged.isServerless,
        readme: merged.readme,
        registryId: merged.registryId,
        gpuTypeId: merged.gpuTypeId,
        gpuCount: merged.gpuCount,
      };
      if (id !== undefined) return tx.template.update({ where: { id }, data });
      return tx.template.create({ data: { id: newId(), accountId: principal.accountId, ...data } });
    });
  } catch (err) {
    if (isUniqueViolation(err))
      throw new DomainError('conflict', `a template named '${patch.name ?? ''}' already exists`);
    throw err;
  }
}

/** Only the keys present in `value` (PATCH semantics: undefined means "leave as is"). */
function defined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The REST shape (create or update) as Template columns; a `persistent: null` mount removes the volume. */
function restFields(input: Static<typeof UpdateTemplateSchema>) {
  const persistent = input.mounts?.persistent;
  return defined({
    name: input.name,
    imageName: input.image,
    dockerArgs: input.args,
    containerDiskInGb: input.disk,
    ports: input.ports?.join(','),
    env: input.env,
    registryId: input.registry,
    volumeInGb: persistent === null ? 0 : persistent?.size,
    volumeMountPath: persistent?.path,
    isServerless: input.serverless,
    readme: input.readme,
  });
}

export async function createTemplate(ctx: DomainContext, principal: Principal, body: unknown): Promise<Template> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  return save(ctx, principal, undefined, restFields(validate(CreateTemplateSchema, body)), REST_PATHS);
}

export async function updateTemplate(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
): Promise<Template> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  return save(ctx, principal, id, restFields(validate(UpdateTemplateSchema, body)), REST_PATHS);
}

async function findOwned(ctx: DomainContext, principal: Principal, id: string): Promise<Template> {
  const row = await ctx.db.template.findFirst({ where: { id, accountId: principal.accountId } });
  if (!row) throw notFound('template');
  return row;
}

export async function getTemplate(ctx: DomainContext, principal: Principal, id: string): Promise<Template> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return findOwned(ctx, principal, id);
}

/** The caller's templates, oldest first. */
export async function listTemplates(ctx: DomainContext, principal: Principal): Promise<Template[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return ctx.db.template.findMany({ where: { accountId: principal.accountId }, orderBy: { createdAt: 'asc' } });
}

/** Deletes a template; refused (400) while a pod or a live endpoint was made from it. */
export async function deleteTemplate(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  await ctx.db.$transaction(async (tx) => {
    const row = await tx.template.findFirst({ where: { id, accountId: principal.accountId }, select: { id: true } });
    if (!row) throw notFound('template');
    const pods = await tx.pod.findMany({ where: { templateId: id }, select: { id: true }, take: 5 });
    if (pods.length > 0)
      throw new DomainError('bad_request', `template is in use by pod ${pods.map((p) => p.id).join(', ')}`);
    const endpoints = await tx.endpoint.findMany({
      where: { templateId: id, deletingAt: null },
      select: { id: true },
      take: 5,
    });
    if (endpoints.length > 0)
      throw new DomainError('bad_request', `template is in use by endpoint ${endpoints.map((e) => e.id).join(', ')}`);
    await tx.template.delete({ where: { id } });
  });
}

/** GraphQL `saveTemplate`: creates without `id`, changes the named template with it. */
export async function saveTemplate(ctx: DomainContext, principal: Principal, input: unknown): Promise<Template> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const i = validate(SaveTemplateInputSchema, input);
  if (i.isPublic) throw validationFailed(["$.isPublic: Gantry keeps no public templates (an account's are its own)"]);
  let env: Record<string, string> | undefined;
  if (i.env) {
    env = {};
    const duplicates = new Set<string>();
    for (const { key, value } of i.env) {
      if (key in env) duplicates.add(key);
      env[key] = value;
    }
    if (duplicates.size > 0) throw validationFailed([...duplicates].map((k) => `$.env: key '${k}' is given twice`));
  }
  return save(
    ctx,
    principal,
    i.id,
    defined({
      name: i.name,
      imageName: i.imageName,
      dockerArgs: i.dockerArgs,
      containerDiskInGb: i.containerDiskInGb,
      volumeInGb: i.volumeInGb,
      volumeMountPath: i.volumeMountPath,
      env,
      ports: i.ports,
      isServerless: i.isServerless,
      readme: i.readme,
      registryId: i.containerRegistryAuthId === '' ? null : i.containerRegistryAuthId,
      gpuTypeId: i.gpuTypeId === '' ? null : i.gpuTypeId,
      gpuCount: i.gpuCount,
    }),
    GRAPHQL_PATHS,
  );
}

/** GraphQL `podTemplate(id)`: one of the caller's templates, or null. */
export async function findTemplate(ctx: DomainContext, principal: Principal, id: string): Promise<Template | null> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return ctx.db.template.findFirst({ where: { id, accountId: principal.accountId } });
}

/** GraphQL `deleteTemplate(templateName)`: templates are named uniquely within an account. */
export async function deleteTemplateByName(ctx: DomainContext, principal: Principal, name: string): Promise<void> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const row = await ctx.db.template.findFirst({
    where: { accountId: principal.accountId, name },
    select: { id: true },
  });
  if (!row) throw notFound('template');
  await deleteTemplate(ctx, principal, row.id);
}
