"""test/config.py for the ldap3 test suite (its sdist ships the tests but not this file), written
for scripts/client-suites.sh: every test talks to the one server named by the environment.

    LDAP3_HOST, LDAP3_PORT      server (127.0.0.1, 389)
    LDAP3_PORT_SSL              its LDAPS port (636)
    LDAP3_ADMIN_DN / _PASSWORD  the account the tests run as (the server's administrator)
    LDAP3_BASE                  existing suffix; the fixtures live in ou=ldap3-fixtures under it

The suite's own "SLAPD" profile is used (test_server_type = 'SLAPD'): users are inetOrgPerson
with the auxiliary posixGroup of RFC 2307bis, so both servers load the rfc2307bis schema.
"""
from os import environ
from random import SystemRandom

from ldap3 import ALL, SIMPLE, SYNC, SEQUENCE_TYPES, STRING_TYPES, IP_V4_ONLY, ROUND_ROBIN, Server, Connection

test_server = environ.get("LDAP3_HOST", "127.0.0.1")
test_port = int(environ.get("LDAP3_PORT", "389"))
test_port_ssl = int(environ.get("LDAP3_PORT_SSL", "636"))
test_server_type = "SLAPD"
test_strategy = SYNC
test_server_mode = IP_V4_ONLY
test_authentication = SIMPLE
test_check_names = True
test_get_info = ALL
test_lazy_connection = False
test_auto_escape = True
test_auto_encode = True
test_usage = True
test_validator = {}
test_internal_decoder = True

_suffix = environ.get("LDAP3_BASE", "dc=example,dc=com")
test_root_partition = ""
test_base = "ou=ldap3-fixtures," + _suffix
test_moved = "ou=ldap3-moved," + _suffix
test_name_attr = "cn"
test_int_attr = "gidNumber"
test_multivalued_attribute = "givenname"
test_singlevalued_attribute = "employeeNumber"
test_server_context = ""
test_server_edir_name = ""
test_user = environ.get("LDAP3_ADMIN_DN", "cn=admin," + _suffix)
test_password = environ.get("LDAP3_ADMIN_PASSWORD", "secret")
test_secondary_user = test_user
test_secondary_password = test_password
# No SASL mechanism is configured on either server: the SASL tests fail on both.
test_sasl_user = test_user
test_sasl_password = test_password
test_sasl_user_dn = test_user
test_sasl_secondary_user = test_user
test_sasl_secondary_password = test_password
test_sasl_secondary_user_dn = test_user
test_sasl_realm = None
test_user_password = "Rc2597pfop"
# Neither server has NTLM here, nor a client certificate to check: those tests fail on both.
test_ca_cert_file = ""
test_user_cert_file = ""
test_user_key_file = ""
test_ntlm_user = "xxx\\yyy"
test_ntlm_password = "zzz"
test_pooling_strategy = ROUND_ROBIN
test_pooling_active = 20
test_pooling_exhaust = 15
test_pool_size = 5
test_valid_names = [test_server]


def random_id():
    return str(SystemRandom().random())[-5:]


def generate_dn(base, batch_id, name):
    return "%s=%s%s,%s" % (test_name_attr, batch_id, name, base)


def get_connection(bind=None, use_ssl=None, check_names=None, lazy_connection=None,
                   authentication=None, sasl_mechanism=None, sasl_credentials=None,
                   ntlm_credentials=(None, None), get_info=None, usage=None,
                   internal_decoder=None, simple_credentials=(None, None),
                   receive_timeout=None, auto_escape=None, auto_encode=None):
    server = Server(host=test_server, port=test_port, use_ssl=bool(use_ssl),
                    get_info=test_get_info if get_info is None else get_info,
                    mode=test_server_mode, allowed_referral_hosts=[("*", True)])
    kwargs = dict(auto_bind=True if bind is None else bind, version=3,
                  client_strategy=test_strategy,
                  lazy=test_lazy_connection if lazy_connection is None else lazy_connection,
                  check_names=test_check_names if check_names is None else check_names,
                  collect_usage=test_usage if usage is None else usage,
                  fast_decoder=test_internal_decoder if internal_decoder is None else internal_decoder,
                  receive_timeout=receive_timeout,
                  auto_escape=test_auto_escape if auto_escape is None else auto_escape,
                  auto_encode=test_auto_encode if auto_encode is None else auto_encode)
    authentication = authentication or test_authentication
    if authentication == "SASL":
        return Connection(server, authentication="SASL", sasl_mechanism=sasl_mechanism,
                          sasl_credentials=sasl_credentials, **kwargs)
    if authentication == "ANONYMOUS":
        return Connection(server, authentication="ANONYMOUS", **kwargs)
    if authentication == "NTLM":
        return Connection(server, authentication="NTLM", user=ntlm_credentials[0],
                          password=ntlm_credentials[1], **kwargs)
    return Connection(server, authentication=authentication,
                      user=simple_credentials[0] or test_user,
                      password=simple_credentials[1] or test_password, **kwargs)


def _result(connection, op):
    if connection.strategy.sync:
        return connection.result
    return connection.get_response(op)[1]


def get_response_values(op, connection):
    """(status, result, response, request) of an operation, whatever the strategy."""
    if connection.strategy.thread_safe:
        return op
    if connection.strategy.sync:
        return op, connection.result, connection.response, connection.request
    response, result, request = connection.get_response(op, get_request=True)
    return result["type"] and result["result"] == 0, result, response, request


def drop_connection(connection, dn_to_delete=None):
    for dn in dn_to_delete or []:
        connection.delete(dn[0])
    connection.unbind()


def _to_bytes(attributes):
    out = {}
    for key, value in attributes.items():
        if isinstance(value, SEQUENCE_TYPES):
            out[key] = [v.encode("utf-8") if isinstance(v, STRING_TYPES) else v for v in value]
        else:
            out[key] = value.encode("utf-8") if isinstance(value, STRING_TYPES) else value
    return out


def get_add_user_attributes(batch_id, username, password=None, attributes=None):
    attributes = dict(attributes or {})
    attributes.update({"objectClass": ["inetOrgPerson", "posixGroup", "top"],
                       "sn": username, "gidNumber": 0})
    return attributes


def add_user(connection, batch_id, username, password=None, attributes=None, test_bytes=False):
    attributes = get_add_user_attributes(batch_id, username, password, attributes)
    if test_bytes:
        attributes = _to_bytes(attributes)
    dn = generate_dn(test_base, batch_id, username)
    result = _result(connection, connection.add(dn, None, attributes))
    if result["description"] != "success":
        _result(connection, connection.delete(dn))
        result = _result(connection, connection.add(dn, None, attributes))
        if result["description"] != "success":
            raise Exception("unable to create user %s: %s" % (dn, result))
    return dn, result


def add_group(connection, batch_id, groupname, members=None, test_bytes=False):
    attributes = {"objectClass": "groupOfNames", "member": [m[0] for m in members or []]}
    if test_bytes:
        attributes = _to_bytes(attributes)
    dn = generate_dn(test_base, batch_id, groupname)
    result = _result(connection, connection.add(dn, [], attributes))
    if result["description"] != "success":
        raise Exception("unable to create group %s: %s" % (groupname, result))
    return dn, result
