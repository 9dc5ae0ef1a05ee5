/**
 * An MCP error's message is shown to a person by the client, and may quote what an agent
 * sent (an unknown member, a method's name): one line, escaped, bounded.
 */
import { describe, expect, it } from 'vitest';
import { errorReply } from '../../src/tools/mcp-message.js';

describe('an MCP error message', () => {
  it('is one line with controls, bidi overrides and lone surrogates escaped, at most 300 characters before escaping', () => {
    expect(errorReply(1, -32602, 'unknown member "x\u001b[2J\u202e\u0085"\r\nnext line\ud800').error.message).toBe('unknown member "x\\u001b[2J\\u202e\\u0085" next line\\ud800');
    expect(errorReply(null, -32600, `  ${'y'.repeat(5000)}`).error.message).toBe(`${'y'.repeat(299)}…`);
    expect(errorReply(2, -32601, 'Method not found: 任务 🚀').error.message).toBe('Method not found: 任务 🚀');
  });
});
