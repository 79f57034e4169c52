#pragma once
// The extender's names for the shared HTTP(S) server (src/http/server.h), kept so that callers
// written against extender::HttpServer stay as they are.
#include "http/server.h"

namespace hami::extender {

using http::HttpHandler;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpServer;
using http::HttpServerOptions;
using http::SplitHostPort;

}  // namespace hami::extender
