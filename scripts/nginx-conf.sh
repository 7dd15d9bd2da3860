#!/bin/sh
# Writes DIR/nginx.conf for nginx serving ROOT on 127.0.0.1:PORT, one worker,
# in the foreground (start it with `nginx -c DIR/nginx.conf -p DIR`), its pid,
# logs and temp files in DIR: the server scripts/remote-test.sh and
# bench/remote_vs_disk.sh start.
#   sh scripts/nginx-conf.sh DIR ROOT PORT
[ $# -eq 3 ] || { echo "usage: sh scripts/nginx-conf.sh DIR ROOT PORT" >&2; exit 2; }
mkdir -p "$1" || exit 1
cat > "$1/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on; # as Debian's own nginx.conf has it: no copy through nginx
    client_body_temp_path $1; proxy_temp_path $1;
    fastcgi_temp_path $1; uwsgi_temp_path $1; scgi_temp_path $1;
    server { listen 127.0.0.1:$3; root $2; location / { } }
}
CONF
