/** The catalog URL with any password replaced: the form every message and log line uses. Apart from
 * control-plane.ts so that a command naming a URL need not load PostgreSQL's client. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/:\/\/([^:@/]+):[^@/]*@/, '://$1:***@');
  }
}
