/** SQL on its own short-lived connection, in the schema a test database URL names (stores.ts newDatabase). */
import pg from 'pg';

export async function sql<R extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = []): Promise<R[]> {
  const u = new URL(url);
  const schema = u.searchParams.get('schema')!;
  u.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: u.toString(), options: `-c search_path=${schema}` });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}
