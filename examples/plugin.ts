// A plugin: `taskloop daemon --plugin ./plugin.js`, or `plugins` of startDaemon. It exports
// `plugin` (or a default export). This one refuses to bump a counter named `forbidden` and
// counts the tool calls it saw.
import { definePlugin } from 'taskloop/plugins';

export const plugin = definePlugin({
  name: 'counter-guard',
  register(api, options) {
    const blocked = new Set((options.blocked as string[] | undefined) ?? ['forbidden']);
    api.on('tool_before', (call) => {
      if (call.tool === 'counter_bump' && blocked.has(String(call.args.name))) {
        return { block: `counter ${String(call.args.name)} may not be bumped` };
      }
      return undefined;
    });
    api.on('run_end', () => undefined);
  },
});
