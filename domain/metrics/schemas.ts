import { Type, type Static } from 'typebox';

/** The windows and steps GET /v2/serverless/{id}/metrics takes, in minutes. */
export const WINDOWS = { '1h': 60, '6h': 360, '24h': 1440, '7d': 10_080 } as const;
export const STEPS = { '1m': 1, '5m': 5, '15m': 15, '1h': 60 } as const;
/** Most points one answer holds (window / step). */
export const MAX_POINTS = 1440;

export type MetricsWindow = keyof typeof WINDOWS;
export type MetricsStep = keyof typeof STEPS;

// Strings and not enumerations in the schema: a window or step it does not know is the domain's
// 400 (with the values it takes), as is a combination of more than MAX_POINTS points.
export const EndpointMetricsQuerySchema = Type.Object(
  {
    window: Type.Optional(
      Type.String({
        maxLength: 8,
        description: `How far back: ${Object.keys(WINDOWS).join(', ')} (default 1h).`,
        examples: ['1h'],
      }),
    ),
    step: Type.Optional(
      Type.String({
        maxLength: 8,
        description: `One point per: ${Object.keys(STEPS).join(', ')} (default 1m). At most ${MAX_POINTS} points (7d takes 15m or 1h).`,
        examples: ['1m'],
      }),
    ),
  },
  { additionalProperties: false },
);
export type EndpointMetricsQuery = Static<typeof EndpointMetricsQuerySchema>;
