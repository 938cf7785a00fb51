// Routing key for nginx's `hash $affinity_key consistent`: requests that
// start alike go to the same kvlab replica, whose prefix cache then holds
// their shared start (a tenant's system prompt, a conversation's first turns).
//
// The key is, in order of preference:
//   - the X-Session-Affinity header, when the client sends one;
//   - the first PREFIX_CHARS characters of the prompt (completions) or of
//     the conversation, messages' roles and texts in order (chat);
//   - the request id, spreading requests without a body (GET) at random.
// A short prefix keeps together requests that share at least that much;
// requests that differ within it may land on different replicas.
const PREFIX_CHARS = 256;

function text(content) {
    if (typeof content === 'string') return content;
    if (Array.isArray(content))  // content parts: only the text ones
        return content.map(p => (p && p.type === 'text' ? p.text : '')).join('');
    return '';
}

function conversation_start(messages) {
    let s = '';
    for (let i = 0; i < messages.length && s.length < PREFIX_CHARS; i++) {  // njs 0.7 has no for-of
        const m = messages[i] || {};
        s += m.role + '\n' + text(m.content) + '\n';
    }
    return s;
}

function prompt_start(prompt) {
    if (typeof prompt === 'string') return prompt;
    if (Array.isArray(prompt) && prompt.length > 0)  // a batch or token ids: its first entry
        return typeof prompt[0] === 'string' ? prompt[0] : JSON.stringify(prompt.slice(0, PREFIX_CHARS / 4));
    return '';
}

function key(r) {
    const session = r.headersIn['X-Session-Affinity'];
    if (session) return 'session:' + session;
    let body;
    try {
        body = JSON.parse(r.requestText);
    } catch (e) {  // no body, or not JSON
        return r.variables.request_id;
    }
    let start = '';
    if (body && Array.isArray(body.messages)) start = conversation_start(body.messages);
    else if (body && body.prompt !== undefined) start = prompt_start(body.prompt);
    if (!start) return r.variables.request_id;
    return 'prefix:' + require('crypto').createHash('sha1').update(start.slice(0, PREFIX_CHARS)).digest('hex');
}

export default { key };
