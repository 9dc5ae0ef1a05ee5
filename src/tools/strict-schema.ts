/**
 * Tool schemas in the form OpenAI's strict function calling (and the frameworks that pass
 * schemas on unconverted) accepts: every object closed (`additionalProperties: false`) with
 * every property required, an optional one made nullable, no `default`, only the keywords
 * strict mode supports, and a free-form object argument (`task_create.card`) taken as a
 * JSON-encoded string. Tool.parse accepts what such a model sends: `null` for an optional
 * argument means "not given", and a JSON string where a free-form object is expected is
 * decoded (depth-checked first).
 */

/** Keywords strict mode supports; any other is dropped (its rule is still enforced by the tool's zod schema). */
const KEPT = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'anyOf', 'description',
  'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'minItems', 'maxItems',
]);

type Schema = Record<string, unknown>;

/** A free-form object (zod's record): properties not known in advance, so not expressible in strict mode. */
export function isFreeForm(s: Schema): boolean {
  return s.type === 'object' && s.properties === undefined;
}

function nullable(s: Schema): Schema {
  if (Array.isArray(s.anyOf)) return { ...s, anyOf: [...s.anyOf, { type: 'null' }] };
  if (typeof s.type === 'string') {
    const out: Schema = { ...s, type: [s.type, 'null'] };
    if (Array.isArray(s.enum)) out.enum = [...s.enum, null];
    return out;
  }
  return { anyOf: [s, { type: 'null' }] };
}

function strictNode(s: Schema, at: string): Schema {
  if (isFreeForm(s)) {
    const note = 'a JSON-encoded object';
    return { type: 'string', description: typeof s.description === 'string' ? `${s.description} (${note})` : note };
  }
  const out: Schema = {};
  for (const [key, value] of Object.entries(s)) if (KEPT.has(key)) out[key] = value;
  if (s.type === 'object') {
    const props = (s.properties ?? {}) as Record<string, Schema>;
    const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
    const properties: Record<string, Schema> = {};
    for (const [name, prop] of Object.entries(props)) {
      const strict = strictNode(prop, `${at}.${name}`);
      properties[name] = required.has(name) ? strict : nullable(strict);
    }
    out.properties = properties;
    out.required = Object.keys(properties);
    out.additionalProperties = false;
  }
  if (s.items !== undefined) out.items = strictNode(s.items as Schema, `${at}[]`);
  if (Array.isArray(s.anyOf)) out.anyOf = (s.anyOf as Schema[]).map((x, i) => strictNode(x, `${at}|${i}`));
  if (out.type === undefined && out.anyOf === undefined && out.enum === undefined && out.const === undefined) {
    throw new Error(`${at}: an argument of any type cannot be expressed in strict mode; give it a type`);
  }
  return out;
}

/** The strict-mode form of a tool's JSON Schema (arguments). Throws for a schema it cannot express. */
export function strictParameters(parameters: Schema, tool: string): Schema {
  return strictNode(parameters, tool);
}

/** What Tool.parse normalises before zod: top-level optional keys and free-form object keys. */
export interface StrictShape {
  optional: ReadonlySet<string>;
  freeForm: ReadonlySet<string>;
}

export function strictShape(parameters: Schema): StrictShape {
  const props = (parameters.properties ?? {}) as Record<string, Schema>;
  const required = new Set(Array.isArray(parameters.required) ? (parameters.required as string[]) : []);
  return {
    optional: new Set(Object.keys(props).filter((k) => !required.has(k))),
    freeForm: new Set(Object.keys(props).filter((k) => isFreeForm(props[k]!))),
  };
}
