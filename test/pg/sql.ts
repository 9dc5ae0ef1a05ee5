/** SQL on its own short-lived connection, in the schema a test database URL names (stores.ts newDatabase). */
import pg from 'pg';

/** Runs `fn` with a client of its own, on the schema `url` names; ends the client after. */
export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const u = new URL(url);
  const schema = u.searchParams.get('schema')!;
  u.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: u.toString(), options: `-c search_path=${schema}` });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function sql<R extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = []): Promise<R[]> {
  return withClient(url, async (client) => (await client.query<R>(text, params)).rows);
}

/** Runs `text` on a connection of its own to the database `url` names as it is (no schema), as an administrator would. */
export async function admin(url: string, text: string): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}
