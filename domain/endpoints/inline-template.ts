import { Type, type Static } from 'typebox';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { validationFailed } from '../errors.ts';
import { saveTemplate } from '../templates/templates.ts';

/**
 * `saveEndpoint(input: {template: {...}})`: the hosted service's `flash` tool sends the endpoint's
 * container configuration inline instead of a templateId. Gantry keeps it as a template of the
 * account under the name flash gives it (flash derives the name from the resource's configuration),
 * created the first time and changed in place after, so the endpoint answers a templateId that
 * `podTemplate` and `saveTemplate` work with, as flash expects.
 */
export const InlineTemplateSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191 }),
    imageName: Type.String({ minLength: 1, maxLength: 1024 }),
    dockerArgs: Type.Optional(Type.String({ maxLength: 4096 })),
    containerDiskInGb: Type.Optional(Type.Integer({ minimum: 1 })),
    volumeInGb: Type.Optional(Type.Integer({ minimum: 0 })),
    volumeMountPath: Type.Optional(Type.String({ maxLength: 1024 })),
    env: Type.Optional(Type.Array(Type.Object({ key: Type.String(), value: Type.String() }), { maxItems: 200 })),
    ports: Type.Optional(Type.String({ maxLength: 1024 })),
    containerRegistryAuthId: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
    // flash sends these on every template with their empty values; anything else would be a start-up
    // Gantry does not run, so it is refused rather than dropped.
    advancedStart: Type.Optional(Type.Boolean()),
    startScript: Type.Optional(Type.String({ maxLength: 64 * 1024 })),
    config: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);
export type InlineTemplate = Static<typeof InlineTemplateSchema>;

/** The id of the account's template that now holds `t` (made or changed). */
export async function saveInlineTemplate(ctx: DomainContext, principal: Principal, t: InlineTemplate): Promise<string> {
  const problems: string[] = [];
  if (t.advancedStart) problems.push('$.template.advancedStart: Gantry runs the image as it is (false only)');
  if (t.startScript) problems.push("$.template.startScript: Gantry runs the image's own command (empty only)");
  const config = t.config ?? {};
  if (config === null || typeof config !== 'object' || Object.keys(config).length > 0)
    problems.push('$.template.config: no template configuration is read here ({} only)');
  if (problems.length > 0) throw validationFailed(problems);
  const existing = await ctx.db.template.findFirst({
    where: { accountId: principal.accountId, name: t.name },
    select: { id: true },
  });
  const saved = await saveTemplate(ctx, principal, {
    ...(existing ? { id: existing.id } : {}),
    name: t.name,
    imageName: t.imageName,
    isServerless: true,
    ...(t.dockerArgs !== undefined ? { dockerArgs: t.dockerArgs } : {}),
    ...(t.containerDiskInGb !== undefined ? { containerDiskInGb: t.containerDiskInGb } : {}),
    ...(t.volumeInGb !== undefined ? { volumeInGb: t.volumeInGb } : {}),
    ...(t.volumeMountPath !== undefined ? { volumeMountPath: t.volumeMountPath } : {}),
    ...(t.env !== undefined ? { env: t.env } : {}),
    ...(t.ports !== undefined ? { ports: t.ports } : {}),
    ...(t.containerRegistryAuthId !== undefined ? { containerRegistryAuthId: t.containerRegistryAuthId } : {}),
  });
  return saved.id;
}
