# The gateway's image: one static binary (CGO off), a CA bundle, a passwd entry
# for the unprivileged user 65532, and the state/PKI directory as a volume.
#
# Nothing is compiled here and nothing is pulled: scripts/build-image.sh (make
# image) builds the binary and lays out bin/image/ first, and .dockerignore
# admits only that directory into the context. So it builds with buildah,
# podman or docker on a machine that reaches no registry:
#
#   make image                                   # or, by hand:
#   CONTEXT_ONLY=1 scripts/build-image.sh && docker buildx build --platform linux/amd64,linux/arm64 -t uagate/gateway .
#
# BASE may name another base image with a shell for debugging (e.g. a
# distroless "static" or busybox image); its /etc/passwd and /etc/group are
# replaced by ours.
ARG BASE=scratch
FROM ${BASE}

# The platform being built (buildah/podman --platform and docker buildx set
# it): the context holds one root filesystem per architecture.
ARG TARGETARCH=amd64

ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=
LABEL org.opencontainers.image.title="uagate gateway" \
      org.opencontainers.image.description="OPC UA to PubSub/JSON gateway (MQTT, NATS, WebSocket, REST)" \
      org.opencontainers.image.source="https://github.com/uagate/gateway" \
      org.opencontainers.image.url="https://github.com/uagate/gateway" \
      org.opencontainers.image.documentation="https://github.com/uagate/gateway#readme" \
      org.opencontainers.image.vendor="uagate" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"

# /gateway, /etc/ssl/certs/ca-certificates.crt, /etc/passwd, /etc/group, /tmp,
# /var/lib, /LICENSE.
COPY bin/image/${TARGETARCH}/rootfs/ /
# The state directory (PKI: own certificate and key, trusted/, rejected/; the
# subscription state) must be writable by the user, also when a fresh volume
# is mounted there: a runtime initialises an empty named volume from the
# image's directory, ownership included.
COPY --chown=65532:65532 bin/image/state/ /var/lib/

USER 65532:65532
WORKDIR /var/lib/uagate
# In a container the listener must face the network, not loopback. Both are
# environment overrides of the configuration file (they win over it).
ENV UAGATE_STATE_DIR=/var/lib/uagate \
    UAGATE_HTTP_LISTEN=0.0.0.0:8080
VOLUME ["/var/lib/uagate"]
# REST, WebSocket (/ws), metrics (/metrics), health (/healthz, /readyz).
EXPOSE 8080
# Ready: GET /readyz on the listener's port (an image without a shell or curl
# runs the gateway's own check). Docker image format only: OCI has no
# health check.
HEALTHCHECK --interval=15s --timeout=6s --start-period=60s --retries=3 CMD ["/gateway", "healthcheck"]
ENTRYPOINT ["/gateway"]
CMD ["run"]
