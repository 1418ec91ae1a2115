// SPDX-License-Identifier: MIT
/*
 * libcurl transport of isergwctl: bearer token, JSON bodies, the headers the CLI reads back
 * (ETag for read-modify-write, X-Isergw-Gateway), and the event stream.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

struct sink {
	char *p;
	size_t len;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t add = size * n;
	char *p = realloc(s->p, s->len + add + 1);

	if (!p)
		return 0;
	memcpy(p + s->len, data, add);
	s->len += add;
	p[s->len] = 0;
	s->p = p;
	return add;
}

static void header_value(const char *line, size_t len, const char *name, char *out,
			 size_t outlen)
{
	size_t n = strlen(name), v;

	if (len <= n + 1 || strncasecmp(line, name, n) || line[n] != ':')
		return;
	line += n + 1;
	len -= n + 1;
	while (len && (*line == ' ' || *line == '\t')) {
		line++;
		len--;
	}
	v = len;
	while (v && (line[v - 1] == '\r' || line[v - 1] == '\n'))
		v--;
	if (v >= outlen)
		v = outlen - 1;
	memcpy(out, line, v);
	out[v] = 0;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct cli_resp *r = arg;

	header_value(data, size * n, "ETag", r->etag, sizeof(r->etag));
	header_value(data, size * n, "X-Isergw-Gateway", r->gateway, sizeof(r->gateway));
	return size * n;
}

static CURL *cli_curl(struct cli *c, const char *method, const char *path,
		      struct curl_slist **hdrs)
{
	CURL *h = curl_easy_init();
	char *url = NULL, auth[600];

	if (!h)
		return NULL;
	if (asprintf(&url, "%s%s", c->url, path) < 0) {
		curl_easy_cleanup(h);
		return NULL;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
	/* Whatever libcurl decodes (gzip for /metrics): smaller answers from a remote agent. */
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	if (c->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (c->cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
	*hdrs = curl_slist_append(*hdrs, "Accept: application/json");
	if (c->token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
		*hdrs = curl_slist_append(*hdrs, auth);
	}
	if (c->if_match) {
		char im[128];

		snprintf(im, sizeof(im), "If-Match: %s", c->if_match);
		*hdrs = curl_slist_append(*hdrs, im);
	}
	return h;
}

int cli_http(struct cli *c, const char *method, const char *path, const char *body,
	     struct cli_resp *out)
{
	struct curl_slist *hdrs = NULL;
	struct sink s = { NULL, 0 };
	CURLcode rc;
	CURL *h;

	memset(out, 0, sizeof(*out));
	h = cli_curl(c, method, path, &hdrs);
	if (!h)
		return CLI_EUNREACH;
	if (body) {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s);
	rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK) {
		free(s.p);
		fprintf(stderr, "isergwctl: %s: %s\n", c->url, curl_easy_strerror(rc));
		return CLI_EUNREACH;
	}
	out->body = s.p;
	out->len = s.len;
	return CLI_OK;
}

static size_t on_stream(char *data, size_t size, size_t n, void *arg)
{
	(void)arg;
	fwrite(data, size, n, stdout);
	fflush(stdout);
	return size * n;
}

int cli_http_stream(struct cli *c, const char *path)
{
	struct curl_slist *hdrs = NULL;
	CURLcode rc;
	long status = 0;
	CURL *h = cli_curl(c, "GET", path, &hdrs);

	if (!h)
		return CLI_EUNREACH;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK) {
		fprintf(stderr, "isergwctl: %s: %s\n", c->url, curl_easy_strerror(rc));
		return CLI_EUNREACH;
	}
	return status >= 400 ? CLI_EAPI : CLI_OK;
}

void cli_resp_free(struct cli_resp *r)
{
	free(r->body);
	r->body = NULL;
}

char *cli_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *p = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~' ||
		    ch == ':') {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = 0;
	return out;
}
