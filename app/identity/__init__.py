"""Who a request is: the decisions on the local user's key, password names, proxy headers and OpenID claims."""
