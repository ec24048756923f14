// A real OpenID Connect provider for tests (panva's oidc-provider 8), on 127.0.0.1 only.
// Configured from the environment; tests/support/oidc.py starts it and documents the pages.
//   OIDC_PORT           port to listen on; the issuer is http://127.0.0.1:<port>
//   OIDC_CLIENT_ID      the one client's id
//   OIDC_CLIENT_SECRET  its secret (client_secret_post at the token endpoint)
//   OIDC_REDIRECT_URIS  its redirect URIs, comma separated
//   OIDC_USERS          JSON: account id -> claims, e.g. {"alice": {"email": "alice@example.com", "groups": ["chat-admins"]}}
import { randomBytes } from 'node:crypto';

import Provider from 'oidc-provider';

function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`provider.mjs: ${name} is not set`);
    process.exit(2);
  }
  return value;
}

const port = Number(required('OIDC_PORT'));
const issuer = `http://127.0.0.1:${port}`;
const redirectUris = required('OIDC_REDIRECT_URIS').split(',').map((uri) => uri.trim()).filter(Boolean);
const users = JSON.parse(process.env.OIDC_USERS || '{}');
// RP-initiated logout may send the user back to the app's root or its login page.
const postLogoutRedirectUris = [...new Set(redirectUris.flatMap((uri) => {
  const { origin } = new URL(uri);
  return [origin, `${origin}/`, `${origin}/login`];
}))];

const provider = new Provider(issuer, {
  clients: [{
    client_id: required('OIDC_CLIENT_ID'),
    client_secret: required('OIDC_CLIENT_SECRET'),
    redirect_uris: redirectUris,
    post_logout_redirect_uris: postLogoutRedirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  // Chainlit's generic provider sends no code_challenge.
  pkce: { required: () => false },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  // Unknown ids have no account; the middleware below keeps them from logging in at all.
  async findAccount(ctx, id) {
    if (!Object.hasOwn(users, id)) return undefined;
    return { accountId: id, claims: async () => ({ ...users[id], sub: id }) };
  },
  cookies: {
    // Signed cookies: a fresh key per run, nothing to keep.
    keys: [randomBytes(32).toString('hex')],
    // Plain http: Chromium drops SameSite=None cookies that are not Secure; the app and the provider
    // share the site 127.0.0.1, so lax is enough.
    long: { httpOnly: true, sameSite: 'lax' },
  },
  features: {
    // The built-in login and consent pages; see tests/support/oidc.py for their fields.
    devInteractions: { enabled: true },
    // An opaque access token from the code flow is good at userinfo, which returns the scopes' claims
    // (conformIdTokenClaims, the default, keeps them out of the ID token).
    userinfo: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
});

// An unknown account id would end in a server error (no account, so no grant to consent to): send the
// browser back to the login page instead. The body read here is handed on to oidc-provider, which accepts
// an already parsed body (it logs a warning once).
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && /^\/interaction\/[^/]+$/.test(ctx.path) && ctx.is('application/x-www-form-urlencoded')) {
    const chunks = [];
    for await (const chunk of ctx.req) chunks.push(chunk);
    const body = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString()));
    if (body.prompt === 'login' && !Object.hasOwn(users, body.login ?? '')) {
      ctx.status = 303;
      ctx.redirect(ctx.path);
      return;
    }
    ctx.request.body = body;
  }
  await next();
});

// Into the test log: the browser only sees "oops! something went wrong".
provider.on('server_error', (ctx, error) => console.error('server_error', ctx.method, ctx.path, error));

provider.listen(port, '127.0.0.1', () => {
  console.log(`listening on ${issuer}`);
});
