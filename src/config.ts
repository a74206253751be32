// All configuration comes from the environment, is validated once at start,
// and a bad value stops the process with a message naming the variable.
import { resolve } from 'node:path';
import { z } from 'zod';

// Digits only: z.coerce.number() would read ' ' as 0 (a random port) and
// accept '0x10' or '1e3'.
const port = z
  .string()
  .regex(/^[0-9]{1,5}$/, 'must be an integer from 0 to 65535')
  .transform(Number)
  .pipe(z.number().max(65535, 'must be an integer from 0 to 65535'));

const schema = z
  .object({
    PORT: port.default(3000),
    HOST: z.string().min(1).default('0.0.0.0'),
    PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
    DATA_DIR: z.string().min(1).default('./data'),
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgresql:// URL')
      .optional(),
    ADMIN_HOST: z.string().min(1).default('127.0.0.1'),
    ADMIN_PORT: port.default(3001),
    ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  })
  .transform((env) => ({
    port: env.PORT,
    host: env.HOST,
    publicUrl: (env.PUBLIC_URL ?? `http://localhost:${env.PORT}`).replace(/\/+$/, ''),
    dataDir: resolve(env.DATA_DIR),
    databaseUrl: env.DATABASE_URL,
    adminHost: env.ADMIN_HOST,
    adminPort: env.ADMIN_PORT,
    adminToken: env.ADMIN_TOKEN,
    logLevel: env.LOG_LEVEL,
  }));

export type Config = z.output<typeof schema>;

/** The environment variables the server reads (the compose-file test checks against these). */
export const configVariables = Object.keys(schema.in.shape);

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most shells' `VAR= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== ''));
  const result = schema.safeParse(present);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`);
  }
  return result.data;
}
