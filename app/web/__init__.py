"""What the app adds around every HTTP request: body limits, security headers, a page that loads nothing foreign."""
