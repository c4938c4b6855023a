// The GraphQL explorer's start-up, run by the browser (served as /graphql/explorer/explorer.js; see
// api/graphql/explorer.ts). GraphiQL, React and ReactDOM come from the scripts loaded before it.
/* global document, location, React, ReactDOM, GraphiQL */
(function () {
  'use strict';
  // The page is served at the GraphQL endpoint itself; queries go there. A key given to the page as
  // `?api_key=` goes with every query the same way; otherwise the headers pane carries it.
  var apiKey = new URLSearchParams(location.search).get('api_key');
  var url = location.pathname + (apiKey ? '?api_key=' + encodeURIComponent(apiKey) : '');

  function fetcher(params, options) {
    var headers = { 'content-type': 'application/json', accept: 'application/json' };
    var extra = (options && options.headers) || {};
    Object.keys(extra).forEach(function (name) {
      headers[name] = extra[name];
    });
    return fetch(url, { method: 'POST', headers: headers, body: JSON.stringify(params), credentials: 'omit' }).then(
      function (response) {
        return response.text().then(function (text) {
          try {
            return JSON.parse(text);
          } catch {
            return { errors: [{ message: 'HTTP ' + response.status + ': ' + text.slice(0, 500) }] };
          }
        });
      },
    );
  }

  var defaultHeaders = apiKey ? '' : '{\n  "Authorization": "Bearer <your API key>"\n}';
  var defaultQuery =
    '# Gantry GraphQL. Your API key goes in the Headers\n' +
    '# pane ("Authorization": "Bearer <key>"), or open\n' +
    '# this page as /graphql?api_key=<key>. Run the query\n' +
    '# with the play button (Ctrl+Enter).\n\n' +
    '{\n  myself {\n    id\n    endpoints {\n      id\n      name\n    }\n  }\n}\n';

  ReactDOM.createRoot(document.getElementById('graphiql')).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: defaultQuery,
      defaultHeaders: defaultHeaders,
      defaultEditorToolsVisibility: apiKey ? false : 'headers',
      // Keys typed into the headers pane stay out of the browser's storage.
      shouldPersistHeaders: false,
    }),
  );
})();
